package main

import (
	"bufio"
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

	"github.com/vh5fs/vh5fs/fsnode"
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
	for _, c := range readConfigs(size) {
		if !strings.Contains(c.name, layouts) {
			continue
		}
		file, plain, err := generateRead(cache, c)
		if err != nil {
			return err
		}
		// The host's speed drifts over minutes: each repetition reads through vh5fs and
		// through every reference back to back, and the ratios are the medians of each
		// repetition's ratios.
		r, err := measureRates(reps, vh5fs, file, plain, raw)
		if err != nil {
			return err
		}
		fmt.Printf("%-28s | %8.2f %8.2f | %8.2f %8.2f | %8.2f | %8.2f %8.2f | %8.2fx %9.2fx %8.2fx %8.2fx\n",
			c.name, mid(r.cold), mid(r.warm), mid(r.loopCold), mid(r.loopWarm), mid(r.page), mid(r.vds), mid(r.plain),
			mid(r.ratio(r.cold, r.loopCold)), mid(r.ratio(r.cold, r.vds)), mid(r.ratio(r.cold, r.plain)), mid(r.ratio(r.warm, r.page)))
		if !keep && c.name != readConfigs(size)[0].name { // the first layout serves the latency suite
			os.Remove(file)
			os.Remove(plain)
		}
	}
	fmt.Println("vh5fs/loopbk: first read after mounting (the .h5/.bin itself in the page cache), then a second read (kernel page cache of the mount).")
	fmt.Println("vs loopbk, vs h5pyvds, vs h5py: vh5fs's first read over the reference's, the median of the ratios of reads taken back to back;")
	fmt.Println("cached/pc: vh5fs's second read over page-cache dd of the same bytes, likewise.")
	return nil
}

// rates holds one layout's sequential read rates (GB/s), one per repetition.
type rates struct{ cold, warm, loopCold, loopWarm, page, vds, plain []float64 }

// measureRates reads the layout reps times through each: vh5fs (file's current version,
// cold then warm), the loopback (raw, the same bytes), the page cache (raw), h5py on the
// version's virtual dataset and on the plain dataset.
func measureRates(reps int, vh5fs, file, plain, raw string) (*rates, error) {
	vds, err := newH5pyReader(file, "/_version_data/versions/v0/data")
	if err != nil {
		return nil, err
	}
	defer vds.close()
	pl, err := newH5pyReader(plain, "/data")
	if err != nil {
		return nil, err
	}
	defer pl.close()
	r := &rates{}
	for range reps {
		c, w, err := vh5fsRates(vh5fs, file)
		if err != nil {
			return nil, err
		}
		lc, lw, err := loopbackRates(raw)
		if err != nil {
			return nil, err
		}
		pc, err := ddRate(raw)
		if err != nil {
			return nil, err
		}
		v, err := vds.rate()
		if err != nil {
			return nil, err
		}
		p, err := pl.rate()
		if err != nil {
			return nil, err
		}
		r.cold, r.warm = append(r.cold, c), append(r.warm, w)
		r.loopCold, r.loopWarm = append(r.loopCold, lc), append(r.loopWarm, lw)
		r.vds, r.plain, r.page = append(r.vds, v), append(r.plain, p), append(r.page, pc)
	}
	return r, nil
}

// ratio is each repetition's x over ref.
func (r *rates) ratio(x, ref []float64) []float64 {
	out := make([]float64, len(ref))
	for i := range ref {
		out[i] = x[i] / ref[i]
	}
	return out
}

// mid is the median of v.
func mid(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// ddRate reads path sequentially in 1 MiB blocks and returns GB/s, timed from after the
// open, as dd times itself.
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

// vh5fsRates reads the current version's dataset of file through a fresh vh5fs mount, then
// again from the mount's page cache.
func vh5fsRates(bin, file string) (cold, warm float64, err error) {
	m, err := startMount(bin, "mount", file)
	if err != nil {
		return 0, 0, err
	}
	defer m.stop()
	return twice(filepath.Join(m.dir, "current", "data"), "vh5fs")
}

// loopbackRates reads raw through a minimal go-fuse loopback mount of its directory (the
// daemon serves the reads: no passthrough), cold then with FOPEN_KEEP_CACHE's page cache.
func loopbackRates(raw string) (cold, warm float64, err error) {
	self, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	m, err := startMount(self, "-suite", "loopback-serve", "-src", filepath.Dir(raw))
	if err != nil {
		return 0, 0, err
	}
	defer m.stop()
	return twice(filepath.Join(m.dir, filepath.Base(raw)), "the loopback")
}

// twice reads path twice with ddRate.
func twice(path, what string) (first, second float64, err error) {
	first, err1 := ddRate(path)
	second, err2 := ddRate(path)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("reading through %s: %v %v", what, err1, err2)
	}
	return first, second, nil
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
	// vh5fs's read settings, with the timeouts of its committed versions (the served file
	// never changes); passthrough off: the daemon serves every READ, as a chunk-assembling
	// file system must.
	timeout := fsnode.ImmutableTimeout
	opts := &fs.Options{
		MountOptions:    fuse.MountOptions{DisabledCapabilities: fuse.CAP_PASSTHROUGH},
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &timeout,
	}
	fsnode.TuneReads(&opts.MountOptions)
	srv, err := fs.Mount(mnt, root.RootNode, opts)
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

// h5pyReader is a Python process that times h5py reading a whole dataset (opened anew
// each time, as a user's script does) whenever it is asked, so that its reads can be taken
// between the other references' while its process stays warm.
type h5pyReader struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func newH5pyReader(file, path string) (*h5pyReader, error) {
	script := `import sys, time, h5py
f = h5py.File(sys.argv[1], "r")
for _ in sys.stdin:
    t = time.perf_counter(); a = f[sys.argv[2]][()]
    print(a.nbytes / (time.perf_counter() - t) / 1e9, flush=True)
`
	cmd := exec.Command("/usr/bin/python3", "-c", script, file, path)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("h5py reader of %s: %w", file, err)
	}
	return &h5pyReader{cmd: cmd, in: in, out: bufio.NewScanner(out)}, nil
}

// rate reads the dataset once, GB/s.
func (r *h5pyReader) rate() (float64, error) {
	if _, err := io.WriteString(r.in, "\n"); err != nil {
		return 0, fmt.Errorf("h5py reader: %w", err)
	}
	if !r.out.Scan() {
		return 0, fmt.Errorf("h5py reader stopped: %v", r.out.Err())
	}
	return strconv.ParseFloat(strings.TrimSpace(r.out.Text()), 64)
}

func (r *h5pyReader) close() {
	r.in.Close()
	r.cmd.Wait()
}
