package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// benchLatency prints time to first byte, chunk-map time, random-read latency, directory
// listing cost and peak memory.
func benchLatency(cache, vh5fs string, reps int, size int64) error {
	fmt.Printf("\nlatency, median of %d\n", reps)
	// Time to first byte and the chunk map, on datasets of 10k and 100k chunks.
	for _, n := range []int{10000, 100000} {
		file, err := generate(cache, n, 10)
		if err != nil {
			return err
		}
		ttfb := medianDur(reps, func() (time.Duration, error) {
			m, err := startMount(vh5fs, "mount", file)
			if err != nil {
				return 0, err
			}
			defer m.stop()
			start := time.Now()
			f, err := os.Open(filepath.Join(m.dir, "current", "data"))
			if err != nil {
				return 0, err
			}
			defer f.Close()
			buf := make([]byte, 4096)
			_, err = f.ReadAt(buf, 0)
			return time.Since(start), err
		})
		mapTime := medianDur(reps, func() (time.Duration, error) {
			m, err := startMount(vh5fs, "mount", file)
			if err != nil {
				return 0, err
			}
			defer m.stop()
			p := filepath.Join(m.dir, "current", "data")
			if _, err := os.Stat(p); err != nil { // the dataset itself is loaded: time the map
				return 0, err
			}
			start := time.Now()
			pages, err := chunkMapPages(p)
			if err != nil {
				return 0, err
			}
			for i := 0; i < pages; i++ {
				if _, err := getxattr(p, fmt.Sprintf("user.vh5fs.chunkmap.%d", i)); err != nil {
					return 0, err
				}
			}
			return time.Since(start), nil
		})
		ref := "h5py: 360-490 ms for 16k chunks"
		fmt.Printf("%6d chunks: open+read 4 KiB %9s (%s); full chunk map %9s (aim: well under 50 ms for 10k)\n", n, ms(ttfb), ref, ms(mapTime))
	}

	// 10,000 random 4 KiB preads, through vh5fs and through the loopback.
	raw := filepath.Join(cache, fmt.Sprintf("raw-%d.bin", size))
	cfg := readConfigs(size)[0] // 1-D, 64 KiB chunks, uncompressed
	file, _, err := generateRead(cache, cfg)
	if err != nil {
		return err
	}
	vp50, vp99, err := randomReads(vh5fs, []string{"mount", file}, "current/data", size)
	if err != nil {
		return err
	}
	self, _ := os.Executable()
	lp50, lp99, err := randomReads(self, []string{"-suite", "loopback-serve", "-src", filepath.Dir(raw)}, filepath.Base(raw), size)
	if err != nil {
		return err
	}
	fmt.Printf("10,000 random 4 KiB preads (%s): vh5fs p50 %s p99 %s; loopback p50 %s p99 %s; ratio p50 %.2fx\n",
		cfg.name, us(vp50), us(vp99), us(lp50), us(lp99), float64(vp50)/float64(lp50))

	// ls versions/ and stat of every dataset, with 300 and 10,000 versions.
	many, err := generateHistory(cache, 10000)
	if err != nil {
		return err
	}
	for _, file := range []string{"tests/testdata/fixtures/many_versions.h5", many} {
		ls := medianDur(reps, func() (time.Duration, error) {
			m, err := startMount(vh5fs, "mount", file)
			if err != nil {
				return 0, err
			}
			defer m.stop()
			start := time.Now()
			_, err = os.ReadDir(filepath.Join(m.dir, "versions"))
			return time.Since(start), err
		})
		d := medianDur(reps, func() (time.Duration, error) {
			m, err := startMount(vh5fs, "mount", file)
			if err != nil {
				return 0, err
			}
			defer m.stop()
			start := time.Now()
			entries, err := os.ReadDir(filepath.Join(m.dir, "versions"))
			if err != nil {
				return 0, err
			}
			for _, e := range entries {
				if err := statTree(filepath.Join(m.dir, "versions", e.Name())); err != nil {
					return 0, err
				}
			}
			return time.Since(start), nil
		})
		n, _ := countVersions(file)
		fmt.Printf("%5d versions: ls versions/ %9s (aim: under 100 ms for 10,000); + stat of every dataset %9s\n", n, ms(ls), ms(d))
	}

	// Peak RSS of the mount while streaming the dataset.
	m, err := startMount(vh5fs, "mount", file)
	if err != nil {
		return err
	}
	if _, err := ddRate(filepath.Join(m.dir, "current", "data")); err != nil {
		m.stop()
		return err
	}
	hwm := peakRSS(m.cmd.Process.Pid)
	m.stop()
	fmt.Printf("peak RSS of the mount streaming %d MiB: %d MiB\n", size>>20, hwm>>20)
	return nil
}

func medianDur(reps int, f func() (time.Duration, error)) time.Duration {
	var v []time.Duration
	for i := 0; i < reps; i++ {
		d, err := f()
		if err != nil {
			fatal(err)
		}
		v = append(v, d)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func chunkMapPages(path string) (int, error) {
	b, err := getxattr(path, "user.vh5fs.chunkmap")
	if err != nil {
		return 0, err
	}
	i := strings.Index(string(b), `"pages":`)
	if i < 0 {
		return 0, fmt.Errorf("no pages in the chunk map")
	}
	rest := string(b[i+len(`"pages":`):])
	end := strings.IndexAny(rest, ",}")
	return strconv.Atoi(rest[:end])
}

func randomReads(bin string, args []string, rel string, size int64) (p50, p99 time.Duration, err error) {
	m, err := startMount(bin, args...)
	if err != nil {
		return 0, 0, err
	}
	defer m.stop()
	f, err := os.Open(filepath.Join(m.dir, rel))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	return timePreads(f, size)
}

func statTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			if err := statTree(p); err != nil {
				return err
			}
		} else if _, err := os.Stat(p); err != nil {
			return err
		}
	}
	return nil
}

func generateHistory(cache string, n int) (string, error) {
	file := filepath.Join(cache, fmt.Sprintf("history-%d.h5", n))
	if _, err := os.Stat(file); err == nil {
		return file, nil
	}
	fmt.Fprintf(os.Stderr, "generating %s ...\n", file)
	if err := run("/usr/bin/python3", "tests/py/make_versioned.py", file+".tmp", "--shape", "64", "--chunks", "64", "--history", strconv.Itoa(n-1)); err != nil {
		return "", err
	}
	return file, os.Rename(file+".tmp", file)
}

func countVersions(file string) (int, error) {
	out, err := runOut("/usr/bin/python3", "-c", "import sys,h5py; print(len(h5py.File(sys.argv[1],'r')['_version_data/versions']) - 1)", file)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out))
}

func us(d time.Duration) string { return fmt.Sprintf("%.1fµs", float64(d)/1e3) }
