package mountopts

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParse: any option string parses or fails cleanly, and what parses round-trips.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{"ro", "rw,live", "ro,allow_other,debug", "fsname=a\\,b", "x-systemd.automount,nofail", "commit_name=v1", "uid=1000,umask=022", "noatime,nolazytime,blksize=1", "rw,,live", "ro=1", "=", "\\"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Parse(s)
		if err != nil {
			return
		}
		back, err := Parse(c.String())
		require.NoError(t, err, "%q -> %q", s, c.String())
		require.Equal(t, c, back)
	})
}
