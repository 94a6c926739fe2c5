package main

// Suite "refs": Dask reading a version through `vh5fs refs` references on a LocalCluster of
// 2 worker processes, against h5py reading the version's virtual dataset.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// benchRefs prints, per gzip layout of the read suite, h5py's and Dask's rates and their
// ratio, and the time `vh5fs refs` takes for the version.
func benchRefs(cache string, size int64, reps int, vh5fs, layouts string) error {
	fmt.Printf("\nDask over references, 2 workers, vs h5py reading the version's virtual dataset, on the benchmark's gzip layouts: ratio\n")
	fmt.Printf("(%d MiB float64 datasets, each read and summed; GB/s, median of %d)\n", size>>20, reps)
	fmt.Printf("%-28s | %8s %8s | %8s | %10s %8s\n", "layout", "h5py-vds", "dask", "ratio", "vh5fs refs", "chunks")
	for _, c := range readConfigs(size) {
		if !c.gzip || !strings.Contains(c.name, layouts) {
			continue
		}
		file, _, err := generateRead(cache, c) // the plain file is the read suite's
		if err != nil {
			return err
		}
		refs := filepath.Join(cache, "refs-"+filepath.Base(file)+".json")
		var took []time.Duration
		for range reps {
			start := time.Now()
			if out, err := exec.Command(vh5fs, "refs", file, "v0", "-o", refs).CombinedOutput(); err != nil {
				return fmt.Errorf("vh5fs refs %s: %v: %s", file, err, out)
			}
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		chunks, err := countChunks(refs)
		if err != nil {
			return err
		}
		out, err := exec.Command("/usr/bin/python3", "tests/py/dask_refs.py", file, refs, "v0", "data", "--bench", fmt.Sprint(reps)).Output()
		if err != nil {
			return fmt.Errorf("dask_refs.py %s: %w", file, err)
		}
		var r struct {
			H5py  []float64 `json:"h5py_s"`
			Dask  []float64 `json:"dask_s"`
			Bytes float64   `json:"bytes"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			return fmt.Errorf("dask_refs.py: %w: %s", err, out)
		}
		rate := func(s []float64) []float64 {
			out := make([]float64, len(s))
			for i, x := range s {
				out[i] = r.Bytes / x / 1e9
			}
			return out
		}
		ratios := make([]float64, len(r.Dask))
		for i := range ratios {
			ratios[i] = r.H5py[i] / r.Dask[i]
		}
		fmt.Printf("%-28s | %8.2f %8.2f | %7.2fx | %8.0fms %8d\n", c.name, mid(rate(r.H5py)), mid(rate(r.Dask)), mid(ratios),
			float64(took[len(took)/2].Microseconds())/1000, chunks)
		os.Remove(refs)
	}
	fmt.Println("ratio: h5py's time over Dask's, the median of runs taken back to back; Dask's blocks are about 32 MiB of whole chunks.")
	fmt.Println("vh5fs refs: the command's time for the version (median), chunks: keys in the references.")
	return nil
}

// countChunks counts the chunk keys of a references document.
func countChunks(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var doc struct {
		Refs map[string]json.RawMessage `json:"refs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	n := 0
	for k := range doc.Refs {
		if i := strings.LastIndexByte(k, '/'); i >= 0 && !strings.HasPrefix(k[i+1:], ".") {
			n++
		}
	}
	return n, nil
}
