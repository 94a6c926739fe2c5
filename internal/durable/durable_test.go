package durable

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWriteFile: the file is replaced whole; a failed fill leaves the old one and no
// temporary file.
func TestWriteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.json")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
	for _, tc := range []struct {
		name string
		fill func(w io.Writer) error
		want string
		err  bool
	}{
		{"replaced", func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }, "new", false},
		{"failed fill", func(w io.Writer) error { io.WriteString(w, "half"); return errors.New("disk full") }, "new", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := WriteFile(path, 0o600, tc.fill)
			require.Equal(t, tc.err, err != nil, "%v", err)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, tc.want, string(b))
			require.NoFileExists(t, path+".tmp")
		})
	}
}
