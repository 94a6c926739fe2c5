package modify

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLZFSize: lzfSize counts what h5py's LZF filter (liblzf) stores, chunk by chunk, for
// data that compresses well, little and not at all, shuffled or not.
func TestLZFSize(t *testing.T) {
	const n = 4096 // elements a chunk
	gen := map[string]func(i int) float64{
		"ramp":   func(i int) float64 { return float64(i) },
		"steps":  func(i int) float64 { return float64(i / 300) },
		"zeros":  func(i int) float64 { return 0 },
		"sine":   func(i int) float64 { return math.Sin(float64(i) / 50) },
		"hashed": func(i int) float64 { return float64(uint32(i)*2654435761) / (1 << 32) },
	}
	dir := t.TempDir()
	var names []string
	for name, f := range gen {
		b := make([]byte, 3*n*8)
		for i := range 3 * n {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(f(i)))
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".bin"), b, 0o644))
		names = append(names, name)
	}
	script := `import h5py, json, numpy as np, sys
out = {}
with h5py.File(sys.argv[1] + "/lzf.h5", "w") as f:
    for name in sys.argv[2:]:
        a = np.fromfile(sys.argv[1] + "/" + name + ".bin", dtype="<f8")
        for shuffle in (False, True):
            d = f.create_dataset(name + str(shuffle), data=a, chunks=(4096,), compression="lzf", shuffle=shuffle)
            out[name + str(shuffle)] = [d.id.get_chunk_info(i).size for i in range(d.id.get_num_chunks())]
print(json.dumps(out))
`
	cmd := exec.Command("/usr/bin/python3", append([]string{"-c", script, dir}, names...)...)
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("h5py with LZF: %v", err)
	}
	var want map[string][]int
	require.NoError(t, json.Unmarshal(out, &want))
	htab := make([]int32, 1<<16)
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name+".bin"))
		require.NoError(t, err)
		for _, shuffle := range []bool{false, true} {
			sizes := want[name+map[bool]string{false: "False", true: "True"}[shuffle]]
			require.Len(t, sizes, 3)
			for c, size := range sizes {
				chunk := b[c*n*8 : (c+1)*n*8]
				if shuffle {
					s := make([]byte, len(chunk))
					for i := range n {
						for j := range 8 {
							s[j*n+i] = chunk[8*i+j]
						}
					}
					chunk = s
				}
				require.Equal(t, size, lzfSize(chunk, htab), "%s shuffle=%v chunk %d", name, shuffle, c)
			}
		}
	}
}
