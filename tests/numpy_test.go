package tests

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// TestNumpyAgainstH5py reads every mounted fixture with numpy.fromfile and numpy.memmap
// and compares with h5py's read of the same version (tests/py/check_numpy.py).
func TestNumpyAgainstH5py(t *testing.T) {
	py := python(t)
	manifests, err := fixture.All()
	require.NoError(t, err)
	for _, m := range manifests {
		t.Run(m.File, func(t *testing.T) {
			mnt := mount(t, m.H5)
			out, err := exec.Command(py, "py/check_numpy.py", m.H5, mnt.Dir).CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Contains(t, string(out), "datasets match h5py")
			require.Equal(t, countLines(string(out), "ok "), countDatasets(m))
		})
	}
}

func countLines(s, prefix string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

func countDatasets(m *fixture.Manifest) int {
	n := 0
	for _, v := range m.Versions {
		n += len(v.Datasets)
	}
	return n
}
