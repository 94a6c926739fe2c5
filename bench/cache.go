package main

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/vh5fs/vh5fs/fsnode"
)

// Suite "cache" (-suite cache): the decoded cache (-o cache) against the page cache of a
// plain file of the same bytes and go-fuse's loopback with and without passthrough: first
// and second sequential read of a fresh mount, 10,000 random 4 KiB preads (p50, p99) and a
// numpy.memmap touching every page, for a hot version (its entry complete) and a cold one
// (no entry: the fill starts after the first read), uncompressed and gzip+shuffle; then
// the first read's cost while the cache fills: the old binary (-old-vh5fs, without a
// cache) against this one with -o cache, alternating.

// cacheTarget is one column group of the cache suite: how to serve the bytes and where.
type cacheTarget struct {
	name  string
	mount func() (*mountProc, string, func(), error) // the mount, the file in it, a cleanup; nil: the plain file
}

// settle is how long a fresh mount is left alone before its first read.
const settle = time.Second

// cacheSample is one repetition's figures of one target.
type cacheSample struct {
	first, second, memmap, memmap3 float64 // GB/s; memmap: first pass, memmap3: later passes
	p50, p99                       time.Duration
}

func benchCache(cache, vh5fs, old string, sizeMiB, reps int, fillOnly bool) error {
	size := int64(sizeMiB) << 20
	fmt.Printf("\ndecoded cache: a %d MiB float64 dataset (2-D, 1 MiB chunks); median of %d rounds, each target once a round\n", sizeMiB, reps)
	raw := filepath.Join(cache, fmt.Sprintf("raw-%d.bin", size))
	if err := writeRaw(raw, size); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	rows := size / 8 / 1024
	fmt.Printf("%-14s %-12s | %8s %8s | %9s %9s | %8s %8s | %7s %7s %7s %7s %7s\n", "layout", "target", "1st GB/s", "2nd GB/s",
		"pread p50", "p99", "mmap1", "mmapN", "1st/pc", "2nd/pc", "p50/pc", "mmap1/pc", "mmapN/pc")
	for _, gz := range []bool{false, true} {
		c := readConfig{"2-D 1MiB", []int64{rows, 1024}, []int64{128, 1024}, gz}
		layout := "uncompressed"
		if gz {
			c.name += "+gzip4+shuffle"
			layout = "gzip+shuffle"
		}
		file, _, err := generateRead(cache, c)
		if err != nil {
			return err
		}
		if fillOnly {
			if err := fillCost(old, vh5fs, file, size, reps, layout); err != nil {
				return err
			}
			continue
		}
		hotDir, err := os.MkdirTemp("", "vh5fs-bench-cache")
		if err != nil {
			return err
		}
		defer os.RemoveAll(hotDir)
		if err := fillCache(vh5fs, file, hotDir); err != nil {
			return err
		}
		mountVh5fs := func(hot string) func() (*mountProc, string, func(), error) {
			return func() (*mountProc, string, func(), error) {
				dir, cleanup := hot, func() {}
				if dir == "" { // cold: an empty cache of its own each round
					d, err := os.MkdirTemp("", "vh5fs-bench-cold")
					if err != nil {
						return nil, "", nil, err
					}
					dir, cleanup = d, func() { os.RemoveAll(d) }
				}
				m, err := startMount(vh5fs, "mount", "-o", "cache="+dir, file)
				return m, "current/data", cleanup, err
			}
		}
		loop := func(mode string) func() (*mountProc, string, func(), error) {
			return func() (*mountProc, string, func(), error) {
				m, err := startMount(self, "-suite", mode, "-src", filepath.Dir(raw))
				return m, filepath.Base(raw), func() {}, err
			}
		}
		targets := []cacheTarget{
			{"page cache", nil},
			{"loopback", loop("loopback-serve")},
			{"loopback+pt", loop("loopback-passthrough-serve")},
			{"vh5fs hot", mountVh5fs(hotDir)},
			{"vh5fs cold", mountVh5fs("")},
		}
		// The machine's speed drifts (its cores are shared): each target's figures are taken
		// right after the page cache's, and its ratios are to those.
		samples := make([][]cacheSample, len(targets))
		refs := make([][]cacheSample, len(targets))
		for r := 0; r < reps; r++ {
			for i, tg := range targets {
				ref, err := measureCacheTarget(targets[0], raw, size)
				if err != nil {
					return fmt.Errorf("%s page cache: %w", layout, err)
				}
				s, err := measureCacheTarget(tg, raw, size)
				if err != nil {
					return fmt.Errorf("%s %s: %w", layout, tg.name, err)
				}
				samples[i], refs[i] = append(samples[i], s), append(refs[i], ref)
			}
		}
		for i, tg := range targets {
			s, pc := samples[i], refs[i]
			col := func(f func(cacheSample) float64) []float64 {
				v := make([]float64, len(s))
				for k := range s {
					v[k] = f(s[k])
				}
				return v
			}
			ratio := func(f func(cacheSample) float64) float64 {
				v := make([]float64, len(s))
				for k := range s {
					v[k] = f(s[k]) / f(pc[k])
				}
				return mid(v)
			}
			first := func(x cacheSample) float64 { return x.first }
			second := func(x cacheSample) float64 { return x.second }
			p50 := func(x cacheSample) float64 { return float64(x.p50) }
			p99 := func(x cacheSample) float64 { return float64(x.p99) }
			mm := func(x cacheSample) float64 { return x.memmap }
			mm3 := func(x cacheSample) float64 { return x.memmap3 }
			fmt.Printf("%-14s %-12s | %8.2f %8.2f | %9s %9s | %8.2f %8.2f | %6.2fx %6.2fx %6.2fx %7.2fx %7.2fx\n", layout, tg.name,
				mid(col(first)), mid(col(second)), us(time.Duration(mid(col(p50)))), us(time.Duration(mid(col(p99)))), mid(col(mm)), mid(col(mm3)),
				ratio(first), ratio(second), ratio(p50), ratio(mm), ratio(mm3))
		}
		if old != "" {
			if err := fillCost(old, vh5fs, file, size, reps, layout); err != nil {
				return err
			}
		}
		os.RemoveAll(hotDir)
	}
	fmt.Println("mmap1, mmapN: numpy.memmap touching every page, the first pass and the median of five more over one mapping (GB/s of the file).")
	fmt.Println("1st/2nd: reads of 1 MiB of a fresh mount (1 s after it mounted), then again (a new open), timed from after the open as dd times itself;")
	fmt.Println("the first-read rows below time the open too (lookups, the dataset's load, its content key).")
	fmt.Println("page cache: the plain file, read before; pc: the ratio to the page cache's figure taken just before, the median over the rounds.")
	fmt.Println("hot: the version's entry complete (the kernel serves it: passthrough); cold: no entry, the fill starts after the first read and runs meanwhile.")
	fmt.Println("loopback+pt: go-fuse's loopback with FUSE passthrough; loopback: the daemon serves every READ.")
	return nil
}

// measureCacheTarget takes one round's figures of tg: two sequential reads, the preads and
// the memmap, on one fresh mount (the plain file: no mount).
func measureCacheTarget(tg cacheTarget, raw string, size int64) (cacheSample, error) {
	var s cacheSample
	path := raw
	if tg.mount != nil {
		m, rel, cleanup, err := tg.mount()
		if err != nil {
			return s, err
		}
		defer cleanup()
		defer m.stop()
		path = filepath.Join(m.dir, rel)
		// A daemon that has just started is still busy with its start (and, on this
		// 2-core machine, takes a core from the reader): the first read is of a mount
		// that has settled, as a user's is.
		time.Sleep(settle)
	} else if _, err := ddRate(raw); err != nil { // in the page cache
		return s, err
	}
	var err error
	if s.first, err = ddRate(path); err != nil {
		return s, err
	}
	if s.second, err = ddRate(path); err != nil {
		return s, err
	}
	if s.p50, s.p99, err = preads(path, size); err != nil {
		return s, err
	}
	s.memmap, s.memmap3, err = memmapRate(path)
	return s, err
}

// preads times 10,000 random 4 KiB preads of path (one open).
func preads(path string, size int64) (p50, p99 time.Duration, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	return timePreads(f, size)
}

// memmapRate maps path with numpy.memmap and touches every page once, six times over the
// one mapping: the first pass's rate (page faults) and the median of the other five's
// (mapped pages), GB/s of the file.
func memmapRate(path string) (first, later float64, err error) {
	out, err := runOut("/usr/bin/python3", "-c", `import sys, time, numpy as np
m = np.memmap(sys.argv[1], dtype=np.uint8, mode="r")
r = []
for _ in range(6):
    t = time.perf_counter(); int(m[::4096].sum()); r.append(len(m) / (time.perf_counter() - t) / 1e9)
print(r[0], sorted(r[1:])[2])`, path)
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("memmap: %q", out)
	}
	if first, err = strconv.ParseFloat(f[0], 64); err != nil {
		return 0, 0, err
	}
	later, err = strconv.ParseFloat(f[1], 64)
	return first, later, err
}

// fillCache mounts file with -o cache=dir, reads its current version whole and waits until
// the entry is complete.
func fillCache(vh5fs, file, dir string) error {
	m, err := startMount(vh5fs, "mount", "-o", "cache="+dir, file)
	if err != nil {
		return err
	}
	defer m.stop()
	if _, err := ddRate(filepath.Join(m.dir, "current", "data")); err != nil {
		return err
	}
	_, err = waitEntry(dir, 5*time.Minute)
	return err
}

// waitEntry waits until dir holds a complete entry and returns how long that took.
func waitEntry(dir string, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	for time.Since(start) < limit {
		des, _ := os.ReadDir(dir)
		for _, de := range des {
			if strings.HasSuffix(de.Name(), ".dec") {
				return time.Since(start), nil
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0, fmt.Errorf("no cache entry in %s after %s", dir, limit)
}

// fillCost prints the first read of a fresh mount by the old binary (no cache) and by this
// one with an empty cache, alternating, and how long after that read the entry was complete.
func fillCost(old, vh5fs, file string, size int64, reps int, layout string) error {
	var olds, news, ratios, fills []float64
	readOld := func() (float64, error) {
		m, err := startMount(old, "mount", file)
		if err != nil {
			return 0, err
		}
		defer m.stop()
		time.Sleep(settle)
		return ddRate(filepath.Join(m.dir, "current", "data"))
	}
	readNew := func() (rate float64, took time.Duration, err error) {
		dir, err := os.MkdirTemp("", "vh5fs-bench-fill")
		if err != nil {
			return 0, 0, err
		}
		defer os.RemoveAll(dir)
		m, err := startMount(vh5fs, "mount", "-o", "cache="+dir, file)
		if err != nil {
			return 0, 0, err
		}
		defer m.stop()
		time.Sleep(settle)
		if rate, err = ddRate(filepath.Join(m.dir, "current", "data")); err != nil {
			return 0, 0, err
		}
		took, err = waitEntry(dir, 5*time.Minute)
		return rate, took, err
	}
	for r := 0; r < reps; r++ {
		// Old first in even rounds, new first in odd ones: neither always follows the other.
		var o, n float64
		var took time.Duration
		var err error
		if r%2 == 0 {
			if o, err = readOld(); err == nil {
				n, took, err = readNew()
			}
		} else {
			if n, took, err = readNew(); err == nil {
				o, err = readOld()
			}
		}
		if err != nil {
			return err
		}
		olds, news, ratios, fills = append(olds, o), append(news, n), append(ratios, o/n), append(fills, took.Seconds())
	}
	fmt.Printf("%-14s first read while the cache fills: old %.2f GB/s, new %.2f GB/s: %.3fx the old time (median of rounds); entry complete %.2f s after (%.2f GB/s)\n",
		layout, mid(olds), mid(news), mid(ratios), mid(fills), float64(size)/mid(fills)/1e9)
	return nil
}

// serveLoopbackPassthrough serves src at mnt with go-fuse's loopback, whose files the
// kernel reads itself (FUSE passthrough): the ceiling a hot version aims at.
func serveLoopbackPassthrough(src, mnt string) error {
	root, err := fs.NewLoopbackRoot(src)
	if err != nil {
		return err
	}
	timeout := fsnode.ImmutableTimeout
	opts := &fs.Options{EntryTimeout: &timeout, AttrTimeout: &timeout, NegativeTimeout: &timeout}
	fsnode.TuneReads(&opts.MountOptions)
	srv, err := fs.Mount(mnt, root, opts)
	if err != nil {
		return err
	}
	if err := fsnode.RaiseReadAhead(mnt); err != nil {
		srv.Unmount()
		return fmt.Errorf("loopback read-ahead: %w", err)
	}
	srv.Wait()
	return nil
}

// timePreads times 10,000 random 4 KiB preads of f (seeded: the same offsets every run).
func timePreads(f *os.File, size int64) (p50, p99 time.Duration, err error) {
	rng := rand.New(rand.NewSource(7))
	buf := make([]byte, 4096)
	lat := make([]time.Duration, 10000)
	for i := range lat {
		off := rng.Int63n(size/4096) * 4096
		start := time.Now()
		if _, err := f.ReadAt(buf, off); err != nil {
			return 0, 0, err
		}
		lat[i] = time.Since(start)
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100], nil
}
