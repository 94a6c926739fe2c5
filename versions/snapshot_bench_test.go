package versions

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkCurrent: what readlink MNT/current costs in a file of many versions
// (VH5FS_BENCH_VERSIONS, default 2000): once the file's state is read (cached), and the
// first time after a commit changed it (new state: the versions group's links read again,
// every version's metadata but the new ones' known).
func BenchmarkCurrent(b *testing.B) {
	n := 2000
	if s := os.Getenv("VH5FS_BENCH_VERSIONS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	py, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		b.Skip("python3 with h5py not available")
	}
	path := filepath.Join(b.TempDir(), "history.h5")
	out, err := exec.Command(py, "../tests/py/make_versioned.py", path, "--shape", "16", "--chunks", "16",
		"--history", strconv.Itoa(n)).CombinedOutput()
	if err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	f, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for _, bc := range []struct {
		name     string
		newState bool
	}{{"cached", false}, {"new state", true}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if bc.newState {
					f.store.Reset() // as a commit's apply moves gen on
				}
				if _, committed, err := f.Current(); err != nil || !committed {
					b.Fatal(committed, err)
				}
			}
		})
	}
}
