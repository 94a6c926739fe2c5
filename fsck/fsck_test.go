package fsck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// TestFixturesClean: every data_version 4 reference file passes.
func TestFixturesClean(t *testing.T) {
	manifests, err := fixture.All()
	require.NoError(t, err)
	for _, m := range manifests {
		if m.DataVersion != 4 {
			continue
		}
		t.Run(m.File, func(t *testing.T) {
			findings, err := Check(m.H5)
			require.NoError(t, err)
			require.Empty(t, findings, Summary(findings))
		})
	}
}

// TestFindsDamage: each kind of damage, made with h5py on a copy of a reference file, is
// reported.
func TestFindsDamage(t *testing.T) {
	for _, tc := range []struct {
		name, script, want string
	}{
		{"slot bytes", `f["_version_data/x/raw_data"][0] = 99`, "digest does not match"},
		{"current_version", `f["_version_data/versions"].attrs["current_version"] = "nope"`, `current_version "nope" is not a version`},
		{"committed type", `f["_version_data/versions/v2"].attrs["committed"] = np.int64(1)`, "committed is not an h5py bool"},
		{"timestamp", `f["_version_data/versions/v2"].attrs["timestamp"] = "yesterday"`, "is not canonical"},
		{"fixed-length string", `f["_version_data/versions/v2"].attrs["prev_version"] = np.bytes_(b"v1")`, "not a scalar variable-length string"},
		{"largest_index", `f["_version_data/x/hash_table"].attrs["largest_index"] = np.int64(99)`, "largest_index 99"},
		{"soft link in a version", `del f["_version_data/versions/v2/x"]; f["_version_data/versions/v2/x"] = h5py.SoftLink("/nowhere")`, "v2/x: not a hard link to a group or dataset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := damaged(t, "basic_1d.h5", tc.script)
			findings, err := Check(file)
			require.NoError(t, err)
			require.Contains(t, Summary(findings), tc.want)
		})
	}
}

func damaged(t *testing.T, fixtureName, script string) string {
	b, err := os.ReadFile(filepath.Join(fixture.Dir(), fixtureName))
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), fixtureName)
	require.NoError(t, os.WriteFile(file, b, 0o644))
	py := "import h5py, numpy as np\nwith h5py.File(" + strconv.Quote(file) + ", 'r+') as f:\n    " + script + "\n"
	out, err := exec.Command("/usr/bin/python3", "-c", py).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return file
}
