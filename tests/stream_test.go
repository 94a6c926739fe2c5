package tests

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/procstatus"
)

// makeVersioned writes a versioned-hdf5 file with tests/py/make_versioned.py.
func makeVersioned(t *testing.T, args ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "data.h5")
	b, err := exec.Command(python(t), append([]string{"py/make_versioned.py", out}, args...)...).CombinedOutput()
	require.NoError(t, err, "%s", b)
	return out
}

// TestGeneratedVersions checks a 2-D multi-version file with edge chunks on both axes:
// version vK differs from its parent in exactly one chunk.
func TestGeneratedVersions(t *testing.T) {
	file := makeVersioned(t, "--shape", "10,7", "--chunks", "4,3", "--versions", "4", "--gzip")
	m := mount(t, file)
	require.Equal(t, []string{"v0", "v1", "v2", "v3"}, readDirNames(t, filepath.Join(m.Dir, "versions")))
	cell := func(k int) (r0, r1, c0, c1 int) { // chunk k-1 in C order of the (3, 3) grid
		g0, g1 := (k-1)/3, (k-1)%3
		return g0 * 4, min(g0*4+4, 10), g1 * 3, min(g1*3+3, 7)
	}
	want := make([]float64, 70)
	for i := range want {
		want[i] = float64(i)
	}
	for v := 0; v < 4; v++ {
		if v > 0 {
			r0, r1, c0, c1 := cell(v)
			for r := r0; r < r1; r++ {
				for c := c0; c < c1; c++ {
					want[r*7+c] = -float64(v)
				}
			}
		}
		b, err := os.ReadFile(filepath.Join(m.Dir, "versions", fmt.Sprintf("v%d", v), "data"))
		require.NoError(t, err)
		require.Len(t, b, 70*8)
		for i, w := range want {
			require.Equal(t, w, math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])), "v%d element %d", v, i)
		}
	}
}

// TestStreamingMemoryBounded streams a 512 MiB dataset (1 MiB chunks) through the mount,
// checking every element, and shows the daemon's peak RSS stays far below the data size:
// reads hold only the chunks they touch (plus a bounded chunk cache).
func TestStreamingMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 512 MiB file")
	}
	const n = 64 << 20 // float64 elements: 512 MiB
	file := makeVersioned(t, "--shape", strconv.Itoa(n), "--chunks", "131072")
	m := mount(t, file)
	f, err := os.Open(filepath.Join(m.Dir, "current", "data"))
	require.NoError(t, err)
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	buf := make([]byte, 1<<20)
	var i int64
	for {
		k, err := io.ReadFull(r, buf)
		for j := 0; j+8 <= k; j += 8 {
			if got := math.Float64frombits(binary.LittleEndian.Uint64(buf[j:])); got != float64(i) {
				require.Equal(t, float64(i), got, "element %d", i)
			}
			i++
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		require.NoError(t, err)
	}
	require.EqualValues(t, n, i)
	hwm := peakRSS(t, m.cmd.Process.Pid)
	t.Logf("streamed %d MiB; vh5fs peak RSS %d MiB", n*8>>20, hwm>>20)
	require.Less(t, hwm, int64(160<<20), "peak RSS of the mount while streaming 512 MiB")
}

// peakRSS reads VmHWM of a process, in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	kb, err := procstatus.KiB(strconv.Itoa(pid), "VmHWM")
	require.NoError(t, err)
	return kb << 10
}
