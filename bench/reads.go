package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// readConfig is one dataset layout of the read suite.
type readConfig struct {
	name   string
	shape  []int64
	chunks []int64
	gzip   bool
}

func (c readConfig) arg(v []int64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(s, ",")
}

func readConfigs(size int64) []readConfig {
	n := size / 8 // float64 elements
	rows := n / 1024
	var out []readConfig
	for _, gz := range []bool{false, true} {
		suffix := ""
		if gz {
			suffix = "+gzip4+shuffle"
		}
		out = append(out,
			readConfig{"1-D 64KiB" + suffix, []int64{n}, []int64{8192}, gz},
			readConfig{"1-D 1MiB" + suffix, []int64{n}, []int64{131072}, gz},
			readConfig{"2-D 64KiB" + suffix, []int64{rows, 1024}, []int64{8, 1024}, gz},
			readConfig{"2-D 1MiB" + suffix, []int64{rows, 1024}, []int64{128, 1024}, gz},
		)
		if !gz {
			// 4 KiB chunks, a quarter of the size: one mapping per 4 KiB makes h5py's open slow.
			out = append(out, readConfig{"1-D 4KiB, quarter size", []int64{n / 4}, []int64{512}, false})
		}
	}
	return out
}

// benchReads prints sequential read throughput of vh5fs against the references.
func benchReads(cache string, size int64, reps int, vh5fs string, keep bool, layouts string) error {
	fmt.Printf("\nsequential read of a %d MiB float64 dataset, 1 MiB reads (dd bs=1M); GB/s, median of %d\n", size>>20, reps)
	fmt.Printf("%-28s | %8s %8s | %8s %8s | %8s | %8s %8s | %9s %10s %9s %9s\n", "layout", "vh5fs", "cached", "loopbk", "cached", "pagecache",
		"h5py-vds", "h5py", "vs loopbk", "vs h5pyvds", "vs h5py", "cached/pc")
	raw := filepath.Join(cache, fmt.Sprintf("raw-%d.bin", size))
	if err := writeRaw(raw, size); err != nil {
		return err
	}
	page := median(reps, func() (float64, error) { return ddRate(raw) })
	loopCold, loopWarm, err := loopbackRates(raw, reps)
	if err != nil {
		return err
	}
	for _, c := range readConfigs(size) {
		if !strings.Contains(c.name, layouts) {
			continue
		}
		file, plain, err := generateRead(cache, c)
		if err != nil {
			return err
		}
		cold, warm, err := vh5fsRates(vh5fs, file, reps)
		if err != nil {
			return err
		}
		vds, err := h5pyRate(file, "/_version_data/versions/v0/data", reps)
		if err != nil {
			return err
		}
		pl, err := h5pyRate(plain, "/data", reps)
		if err != nil {
			return err
		}
		fmt.Printf("%-28s | %8.2f %8.2f | %8.2f %8.2f | %8.2f | %8.2f %8.2f | %8.2fx %9.2fx %8.2fx %8.2fx\n",
			c.name, cold, warm, loopCold, loopWarm, page, vds, pl, cold/loopCold, cold/vds, cold/pl, warm/page)
		if !keep && c.name != readConfigs(size)[0].name { // the first layout serves the latency suite
			os.Remove(file)
			os.Remove(plain)
		}
	}
	fmt.Println("vh5fs/loopbk: first read after mounting (the .h5/.bin itself in the page cache), then a second read (kernel page cache of the mount).")
	fmt.Println("vs loopbk, vs h5pyvds, vs h5py: vh5fs's first read over the reference's; cached/pc: vh5fs's second read over page-cache dd.")
	return nil
}

func median(reps int, f func() (float64, error)) float64 {
	var v []float64
	for i := 0; i < reps; i++ {
		x, err := f()
		if err != nil {
			fatal(err)
		}
		v = append(v, x)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// ddRate reads path sequentially in 1 MiB blocks and returns GB/s.
func ddRate(path string) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	start := time.Now()
	var n int64
	for {
		k, err := f.Read(buf)
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds() / 1e9, nil
}

func writeRaw(path string, size int64) error {
	if st, err := os.Stat(path); err == nil && st.Size() == size {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		for i := 0; i < len(buf); i += 8 {
			binary.LittleEndian.PutUint64(buf[i:], math.Float64bits(float64((off+int64(i))/8)))
		}
		if _, err := f.Write(buf[:min(int64(len(buf)), size-off)]); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

func generateRead(cache string, c readConfig) (versioned, plain string, err error) {
	tag := strings.NewReplacer(" ", "_", "+", "_", ",", "", "/", "_").Replace(c.name) + "-" + c.arg(c.shape)
	versioned = filepath.Join(cache, "read-"+tag+".h5")
	plain = filepath.Join(cache, "plain-"+tag+".h5")
	if _, err := os.Stat(versioned); err != nil {
		fmt.Fprintf(os.Stderr, "generating %s ...\n", versioned)
		args := []string{"tests/py/make_versioned.py", versioned + ".tmp", "--shape", c.arg(c.shape), "--chunks", c.arg(c.chunks)}
		if c.gzip {
			args = append(args, "--gzip")
		}
		if err := run("/usr/bin/python3", args...); err != nil {
			return "", "", err
		}
		if err := os.Rename(versioned+".tmp", versioned); err != nil {
			return "", "", err
		}
	}
	if _, err := os.Stat(plain); err != nil {
		script := `import sys, h5py, numpy as np
shape = tuple(int(x) for x in sys.argv[2].split(",")); chunks = tuple(int(x) for x in sys.argv[3].split(","))
kw = dict(compression="gzip", compression_opts=4, shuffle=True) if sys.argv[4] == "1" else {}
with h5py.File(sys.argv[1], "w") as f:
    d = f.create_dataset("data", shape=shape, chunks=chunks, dtype="<f8", **kw)
    step = max(1, (64 << 20) // (8 * int(np.prod(shape[1:]))))
    inner = int(np.prod(shape[1:]))
    for r in range(0, shape[0], step):
        n = min(step, shape[0] - r)
        d[r:r + n] = np.arange(r * inner, (r + n) * inner, dtype="<f8").reshape((n,) + shape[1:])
`
		gz := "0"
		if c.gzip {
			gz = "1"
		}
		if err := run("/usr/bin/python3", "-c", script, plain+".tmp", c.arg(c.shape), c.arg(c.chunks), gz); err != nil {
			return "", "", err
		}
		if err := os.Rename(plain+".tmp", plain); err != nil {
			return "", "", err
		}
	}
	return versioned, plain, nil
}

func run(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %v: %w", name, args, err)
	}
	return nil
}

// mountProc runs a mount process until stop.
type mountProc struct {
	dir string
	cmd *exec.Cmd
}

func startMount(name string, args ...string) (*mountProc, error) {
	dir, err := os.MkdirTemp("", "vh5fs-bench-mnt")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, append(args, dir)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	m := &mountProc{dir: dir, cmd: cmd}
	for i := 0; i < 500; i++ {
		if mounted(dir) {
			return m, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	m.stop()
	return nil, fmt.Errorf("%s did not mount", name)
}

func (m *mountProc) stop() {
	exec.Command("fusermount3", "-u", m.dir).Run()
	m.cmd.Wait()
	os.Remove(m.dir)
}

func mounted(dir string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

func vh5fsRates(bin, file string, reps int) (cold, warm float64, err error) {
	var colds, warms []float64
	for i := 0; i < reps; i++ {
		m, err := startMount(bin, "mount", file)
		if err != nil {
			return 0, 0, err
		}
		c, err1 := ddRate(filepath.Join(m.dir, "current", "data"))
		w, err2 := ddRate(filepath.Join(m.dir, "current", "data"))
		m.stop()
		if err1 != nil || err2 != nil {
			return 0, 0, fmt.Errorf("reading through vh5fs: %v %v", err1, err2)
		}
		colds, warms = append(colds, c), append(warms, w)
	}
	slices.Sort(colds)
	slices.Sort(warms)
	return colds[len(colds)/2], warms[len(warms)/2], nil
}

// loopbackRates reads raw through a minimal go-fuse loopback mount of its directory (the
// daemon serves the reads: no passthrough), cold then with FOPEN_KEEP_CACHE's page cache.
func loopbackRates(raw string, reps int) (cold, warm float64, err error) {
	self, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	var colds, warms []float64
	for i := 0; i < reps; i++ {
		m, err := startMount(self, "-suite", "loopback-serve", "-src", filepath.Dir(raw))
		if err != nil {
			return 0, 0, err
		}
		c, err1 := ddRate(filepath.Join(m.dir, filepath.Base(raw)))
		w, err2 := ddRate(filepath.Join(m.dir, filepath.Base(raw)))
		m.stop()
		if err1 != nil || err2 != nil {
			return 0, 0, fmt.Errorf("reading through the loopback: %v %v", err1, err2)
		}
		colds, warms = append(colds, c), append(warms, w)
	}
	slices.Sort(colds)
	slices.Sort(warms)
	return colds[len(colds)/2], warms[len(warms)/2], nil
}

// keepCacheNode opens files with FOPEN_KEEP_CACHE, so a second read comes from the page
// cache, as vh5fs's immutable versions do.
type keepCacheNode struct{ fs.LoopbackNode }

func (n *keepCacheNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	return fh, fl | fuse.FOPEN_KEEP_CACHE, errno
}

func serveLoopback(src, mnt string) error {
	var st syscall.Stat_t
	if err := syscall.Stat(src, &st); err != nil {
		return err
	}
	root := &fs.LoopbackRoot{Path: src, Dev: uint64(st.Dev)}
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &keepCacheNode{fs.LoopbackNode{RootData: r}}
	}
	root.RootNode = root.NewNode(root, nil, "", &st)
	// Passthrough off: the daemon serves every READ, as a chunk-assembling file system must.
	srv, err := fs.Mount(mnt, root.RootNode, &fs.Options{MountOptions: fuse.MountOptions{DisabledCapabilities: fuse.CAP_PASSTHROUGH}})
	if err != nil {
		return err
	}
	srv.Wait()
	return nil
}

// h5pyRate times h5py reading a whole dataset, GB/s.
func h5pyRate(file, path string, reps int) (float64, error) {
	script := `import sys, time, h5py
f = h5py.File(sys.argv[1], "r")
best = []
for _ in range(int(sys.argv[3])):
    t = time.perf_counter(); a = f[sys.argv[2]][()]; best.append(a.nbytes / (time.perf_counter() - t) / 1e9)
best.sort(); print(best[len(best) // 2])
`
	out, err := exec.Command("/usr/bin/python3", "-c", script, file, path, strconv.Itoa(reps)).Output()
	if err != nil {
		return 0, fmt.Errorf("h5py read of %s: %w", file, err)
	}
	return strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
}
