package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/versions"
)

// writeChunkElems: float64 64 KiB chunks, the write suite's layout.
const writeChunkElems = 8192

// writeOptions are the write suite's sizes (MiB) and repetitions.
type writeOptions struct {
	vh5fs    string
	cache    string
	reps     int   // runs per dd and cp row (alternating with the plain dd)
	ddSizes  []int // dd over a version
	cpSizes  []int // cp over a dataset, for cost per MiB
	gzipSize int   // gzip+shuffle raw_data row
	latSize  int   // commit during which another version is probed
	small    int   // dd bs=4K over a version, uncompressed and gzip+shuffle
}

// benchWrite prints the write suite: dd and cp through a read-write mount against a plain
// dd of the same bytes to the same filesystem, the daemon's peak RSS, gzip+shuffle
// raw_data throughput against single-threaded libhdf5, and the latency another version's
// readers see during a commit.
func benchWrite(o writeOptions) error {
	fmt.Printf("\nwrite: medians of %d runs, alternating with the reference; float64, 64 KiB chunks; MB = 1e6 B\n", o.reps)
	ref := versionedHDF5Available()
	for _, mib := range o.ddSizes {
		if err := ddRow(o, mib, ref); err != nil {
			return err
		}
	}
	if len(o.cpSizes) > 0 {
		if err := cpRows(o); err != nil {
			return err
		}
	}
	if o.gzipSize > 0 {
		if err := gzipRow(o); err != nil {
			return err
		}
	}
	if o.small > 0 {
		if err := smallRows(o); err != nil {
			return err
		}
	}
	if o.latSize > 0 {
		if err := commitLatencyRow(o); err != nil {
			return err
		}
	}
	return nil
}

// writeFile makes (once) a versioned file of mib MiB of float64 in 64 KiB chunks with
// versions v0 and v1.
func writeFile(cache string, mib int) (string, error) { return makeWriteFile(cache, mib, false) }

// makeWriteFile is writeFile, gzip+shuffle if asked.
func makeWriteFile(cache string, mib int, gzip bool) (string, error) {
	name, args := fmt.Sprintf("write-%d.h5", mib), []string{}
	if gzip {
		name, args = fmt.Sprintf("write-%d-gzip.h5", mib), []string{"--gzip"}
	}
	file := filepath.Join(cache, name)
	if _, err := os.Stat(file); err == nil {
		return file, nil
	}
	fmt.Fprintf(os.Stderr, "generating %s ...\n", file)
	n := int64(mib) << 20 / 8
	args = append([]string{"tests/py/make_versioned.py", file + ".tmp", "--shape", strconv.FormatInt(n, 10),
		"--chunks", strconv.Itoa(writeChunkElems), "--versions", "2"}, args...)
	if err := run("/usr/bin/python3", args...); err != nil {
		return "", err
	}
	return file, os.Rename(file+".tmp", file)
}

// newData makes (once) mib MiB of float64 values no version of writeFile holds: every
// chunk is new to the file.
func newData(cache string, mib int) (string, error) {
	path := filepath.Join(cache, fmt.Sprintf("new-%d.bin", mib))
	size := int64(mib) << 20
	if st, err := os.Stat(path); err == nil && st.Size() == size {
		return path, nil
	}
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return "", err
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		for i := 0; i < len(buf); i += 8 {
			binary.LittleEndian.PutUint64(buf[i:], math.Float64bits(0.5+float64((off+int64(i))/8)))
		}
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return "", err
		}
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return path, os.Rename(path+".tmp", path)
}

// plainDD times dd of src to a new file beside the cache (same filesystem), with fsync.
func plainDD(cache, src string) (time.Duration, error) { return plainDDBlocks(cache, src, "1M") }

// plainDDBlocks is plainDD in blocks of bs.
func plainDDBlocks(cache, src, bs string) (time.Duration, error) {
	dst := filepath.Join(cache, "plain-dd.out")
	defer os.Remove(dst)
	start := time.Now()
	err := run("dd", "if="+src, "of="+dst, "bs="+bs, "conv=fsync", "status=none")
	return time.Since(start), err
}

// loopbackDD times the same dd through go-fuse's loopback (the daemon serves every WRITE,
// with vh5fs's request sizes): the FUSE write ceiling on this machine, so that the ratio
// to a plain dd says how much of the gap is the kernel's FUSE round trips.
func loopbackDD(cache, src string) (time.Duration, error) {
	dir := filepath.Join(cache, "loopback-dd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	m, err := startMount(self, "-suite", "loopback-serve", "-src", dir)
	if err != nil {
		return 0, err
	}
	defer m.stop()
	start := time.Now()
	err = run("dd", "if="+src, "of="+filepath.Join(m.dir, "out"), "bs=1M", "conv=fsync", "status=none")
	return time.Since(start), err
}

// rwMount copies template to a work file and mounts it read-write.
func rwMount(o writeOptions, template string) (*mountProc, string, error) {
	work := filepath.Join(o.cache, "write-work.h5")
	if err := copyFile(template, work); err != nil {
		return nil, "", err
	}
	m, err := startMount(o.vh5fs, "mount", "-o", "rw", work)
	if err != nil {
		os.Remove(work)
		return nil, "", err
	}
	return m, work, nil
}

// checkWritten compares 4 KiB of the current version at a few offsets with src (size
// bytes) written from byte at of the dataset: a run that committed nothing is an error,
// not a fast row.
func checkWritten(mnt, src string, at, size int64) error {
	want, err := os.Open(src)
	if err != nil {
		return err
	}
	defer want.Close()
	got, err := os.Open(filepath.Join(mnt, "current", "data"))
	if err != nil {
		return err
	}
	defer got.Close()
	st, err := got.Stat()
	if err != nil {
		return err
	}
	if st.Size() != at+size {
		return fmt.Errorf("current/data is %d bytes after the write, want %d", st.Size(), at+size)
	}
	a, b := make([]byte, 4096), make([]byte, 4096)
	for _, off := range []int64{0, size / 3, size - 4096} {
		if _, err := want.ReadAt(a, off); err != nil {
			return err
		}
		if _, err := got.ReadAt(b, at+off); err != nil {
			return err
		}
		if !bytes.Equal(a, b) {
			return fmt.Errorf("current/data differs from %s at %d after the write", src, at+off)
		}
	}
	return nil
}

// smallRows: dd bs=4K conv=notrunc,fsync of o.small MiB, uncompressed and gzip+shuffle,
// over version v1 of a dataset that size (16 writes to each 64 KiB chunk, all but the last
// covering it in part: a chunk whose writes complete it never reads its base chunk) and
// appended to one of 16 MiB (every write grows the dataset), against a plain dd bs=4K.
func smallRows(o writeOptions) error {
	src, err := newData(o.cache, o.small)
	if err != nil {
		return err
	}
	size := int64(o.small) << 20
	for _, gzip := range []bool{false, true} {
		for _, appended := range []bool{false, true} {
			mib, at, how := o.small, int64(0), "over a version"
			if appended {
				mib, at, how = 16, 16<<20, "appended to 16 MiB"
			}
			file, err := makeWriteFile(o.cache, mib, gzip)
			if err != nil {
				return err
			}
			var vt, pt, ratios []float64
			for range o.reps {
				p, err := plainDDBlocks(o.cache, src, "4K")
				if err != nil {
					return err
				}
				v, _, err := ddAt(o, file, src, "4K", at, size)
				if err != nil {
					return err
				}
				vt, pt = append(vt, v.Seconds()), append(pt, p.Seconds())
				ratios = append(ratios, p.Seconds()/v.Seconds())
			}
			layout := "uncompressed"
			if gzip {
				layout = "gzip4+shuffle"
			}
			mb := float64(size) / 1e6
			fmt.Printf("dd bs=4K %4d MiB %s (%s): vh5fs %7.1f MB/s (%.2f s), plain dd bs=4K %7.1f MB/s; ratio %.2fx\n",
				o.small, how, layout, mb/mid(vt), mid(vt), mb/mid(pt), mid(ratios))
		}
	}
	return nil
}

// ddAt mounts a copy of file read-write and times dd bs=bs conv=notrunc,fsync of src
// (size bytes) from byte at of its version v1, end to end; it checks that the commit
// holds src and returns the daemon's peak RSS too.
func ddAt(o writeOptions, file, src, bs string, at, size int64) (time.Duration, int64, error) {
	m, work, err := rwMount(o, file)
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(work)
	start := time.Now()
	err = run("dd", "if="+src, "of="+filepath.Join(m.dir, "versions", "v1", "data"), "bs="+bs,
		"oflag=seek_bytes", "seek="+strconv.FormatInt(at, 10), "conv=notrunc,fsync", "status=none")
	v := time.Since(start)
	if err == nil {
		err = checkWritten(m.dir, src, at, size)
	}
	rss := peakRSS(m.cmd.Process.Pid)
	m.stop()
	return v, rss, err
}

// ddRow: dd bs=1M conv=notrunc,fsync of mib MiB over version v1 of a dataset of that size.
func ddRow(o writeOptions, mib int, refAvailable bool) error {
	file, err := writeFile(o.cache, mib)
	if err != nil {
		return err
	}
	src, err := newData(o.cache, mib)
	if err != nil {
		return err
	}
	size := int64(mib) << 20
	var vt, pt, lt, ratios, loopRatios []float64
	var rss []int64
	for range o.reps {
		p, err := plainDD(o.cache, src)
		if err != nil {
			return err
		}
		l, err := loopbackDD(o.cache, src)
		if err != nil {
			return err
		}
		v, peak, err := ddAt(o, file, src, "1M", 0, size)
		if err != nil {
			return err
		}
		rss = append(rss, peak)
		vt, pt, lt = append(vt, v.Seconds()), append(pt, p.Seconds()), append(lt, l.Seconds())
		ratios = append(ratios, p.Seconds()/v.Seconds())
		loopRatios = append(loopRatios, l.Seconds()/v.Seconds())
	}
	mb := float64(size) / 1e6
	fmt.Printf("dd %5d MiB over a version: vh5fs %7.1f MB/s (%.2f s), plain dd %7.1f MB/s; ratio %.2fx (aim >= 0.8x); daemon peak RSS %d MiB (aim <= 256)\n",
		mib, mb/mid(vt), mid(vt), mb/mid(pt), mid(ratios), midInt(rss)>>20)
	fmt.Printf("dd %5d MiB through go-fuse's loopback (the FUSE write ceiling): %7.1f MB/s, ratio to plain dd %.2fx; vh5fs / loopback %.2fx\n",
		mib, mb/mid(lt), mid(pt)/mid(lt), mid(loopRatios))
	if !refAvailable {
		fmt.Printf("dd %5d MiB, versioned-hdf5 staging+commit of the same array: not measured (import versioned_hdf5 fails)\n", mib)
		return nil
	}
	r, err := versionedHDF5Rate(o, file, src)
	if err != nil {
		return err
	}
	fmt.Printf("dd %5d MiB, versioned-hdf5 staging+commit of the same array: %7.1f MB/s; vh5fs / versioned-hdf5 %.2fx (aim >= 3x)\n",
		mib, mb/r, r/mid(vt))
	return nil
}

func versionedHDF5Available() bool {
	return exec.Command("/usr/bin/python3", "-c", "import versioned_hdf5").Run() == nil
}

// versionedHDF5Rate times versioned-hdf5 staging src over the dataset and committing it
// (median seconds).
func versionedHDF5Rate(o writeOptions, template, src string) (float64, error) {
	script := `import sys, os, time, numpy as np, h5py
from versioned_hdf5 import VersionedHDF5File
t = time.perf_counter()
new = np.fromfile(sys.argv[2], dtype="<f8")
with h5py.File(sys.argv[1], "r+") as f:
    vf = VersionedHDF5File(f)
    with vf.stage_version("ref") as sv:
        sv["data"][:] = new
fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd); os.close(fd)
print(time.perf_counter() - t)
`
	var ts []float64
	for range o.reps {
		work := filepath.Join(o.cache, "write-work.h5")
		if err := copyFile(template, work); err != nil {
			return 0, err
		}
		out, err := runOut("/usr/bin/python3", "-c", script, work, src)
		os.Remove(work)
		if err != nil {
			return 0, fmt.Errorf("versioned-hdf5 reference: %w", err)
		}
		t, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
		if err != nil {
			return 0, err
		}
		ts = append(ts, t)
	}
	return mid(ts), nil
}

// cpRows: cp (O_TRUNC, then 128 KiB writes, commit at close) of each size over a small
// dataset; the cost per MiB written shows whether the write path grows faster than linearly.
func cpRows(o writeOptions) error {
	file, err := writeFile(o.cache, 1)
	if err != nil {
		return err
	}
	for _, mib := range o.cpSizes {
		src, err := newData(o.cache, mib)
		if err != nil {
			return err
		}
		var vt, pt, ratios []float64
		for range o.reps {
			p, err := plainDD(o.cache, src)
			if err != nil {
				return err
			}
			m, work, err := rwMount(o, file)
			if err != nil {
				return err
			}
			start := time.Now()
			err = run("cp", src, filepath.Join(m.dir, "versions", "v1", "data"))
			v := time.Since(start)
			if err == nil {
				err = checkWritten(m.dir, src, 0, int64(mib)<<20)
			}
			m.stop()
			os.Remove(work)
			if err != nil {
				return err
			}
			vt, pt = append(vt, v.Seconds()), append(pt, p.Seconds())
			ratios = append(ratios, p.Seconds()/v.Seconds())
		}
		mb := float64(int64(mib)<<20) / 1e6
		fmt.Printf("cp %5d MiB over a dataset: %7.1f MB/s, %6.2f ms per MiB; plain dd %7.1f MB/s; ratio %.2fx (aim >= 0.8x, ms/MiB flat)\n",
			mib, mb/mid(vt), mid(vt)*1e3/float64(mib), mb/mid(pt), mid(ratios))
	}
	return nil
}

// gzipRow stages gzipSize MiB of new data over a gzip+shuffle dataset in process, as a
// read-write mount does, and commits it, against h5py (libhdf5 compressing on one thread)
// writing the same array into a gzip+shuffle dataset of the same chunks; both end with
// fsync.
func gzipRow(o writeOptions) error {
	n := int64(o.gzipSize) << 20 / 8
	cfg := readConfig{"write 1-D 64KiB+gzip4+shuffle", []int64{n}, []int64{writeChunkElems}, true}
	file, _, err := generateRead(o.cache, cfg)
	if err != nil {
		return err
	}
	src, err := newData(o.cache, o.gzipSize)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	script := `import sys, os, time, numpy as np, h5py
new = np.fromfile(sys.argv[2], dtype="<f8")
t = time.perf_counter()
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("data", data=new, chunks=(int(sys.argv[3]),), compression="gzip", compression_opts=4, shuffle=True)
fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd); os.close(fd)
print(time.perf_counter() - t)
`
	var vt, ht, ratios []float64
	for range o.reps {
		out := filepath.Join(o.cache, "gzip-ref.h5")
		s, err := runOut("/usr/bin/python3", "-c", script, out, src, strconv.Itoa(writeChunkElems))
		os.Remove(out)
		if err != nil {
			return fmt.Errorf("h5py gzip reference: %w", err)
		}
		h, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return err
		}
		v, err := stageAndCommit(o.cache, file, data)
		if err != nil {
			return err
		}
		vt, ht = append(vt, v.Seconds()), append(ht, h)
		ratios = append(ratios, h/v.Seconds())
	}
	mb := float64(len(data)) / 1e6
	fmt.Printf("gzip4+shuffle %d MiB staged (32 MiB store) + committed in process: vh5fs %7.1f MB/s, h5py (single-threaded libhdf5) %7.1f MB/s; ratio %.2fx (aim >= 1.7x)\n",
		o.gzipSize, mb/mid(vt), mb/mid(ht), mid(ratios))
	return nil
}

// stageAndCommit writes data over version v0's dataset of a copy of file in 1 MiB writes,
// staged in a store as a read-write mount stages them, and commits it, returning the time
// of both.
func stageAndCommit(cache, file string, data []byte) (time.Duration, error) {
	work := filepath.Join(cache, "gzip-work.h5")
	if err := copyFile(file, work); err != nil {
		return 0, err
	}
	defer os.Remove(work)
	f, err := versions.OpenRW(work)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	// A store and a sink as a read-write mount's: chunks hashed, and encoded where the
	// code does it, on the store's workers while the writes go on.
	c, err := commit.Open(f, commit.Options{StageMem: 32 << 20})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	start := time.Now()
	d, err := f.Dataset(versions.VersionsGroup + "/v0/data")
	if err != nil {
		return 0, err
	}
	arr, err := c.NewArray(d, true)
	if err != nil {
		return 0, err
	}
	for off := 0; off < len(data); off += 1 << 20 {
		if _, err := arr.WriteAt(data[off:min(off+1<<20, len(data))], int64(off), d.ChunkSource()); err != nil {
			return 0, err
		}
	}
	res, err := c.Commit(commit.Change{Base: "v0", Dataset: "data", Array: arr})
	if err != nil {
		return 0, err
	}
	if res.Written == 0 {
		return 0, fmt.Errorf("gzip row: the commit wrote no chunk")
	}
	return time.Since(start), nil
}

// commitLatencyRow writes latSize MiB over version v1 through a mount, then fsyncs (the
// commit) while another goroutine stats and reads 4 KiB of version v0 and lists
// versions/; it prints the worst latency of each seen during the fsync.
func commitLatencyRow(o writeOptions) error {
	file, err := writeFile(o.cache, o.latSize)
	if err != nil {
		return err
	}
	src, err := newData(o.cache, o.latSize)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	var worstStat, worstRead, worstLs, commitT []float64
	for range o.reps {
		m, work, err := rwMount(o, file)
		if err != nil {
			return err
		}
		ws, wr, wl, ct, err := probeDuringCommit(m.dir, data)
		m.stop()
		os.Remove(work)
		if err != nil {
			return err
		}
		worstStat, worstRead, worstLs = append(worstStat, ws.Seconds()), append(worstRead, wr.Seconds()), append(worstLs, wl.Seconds())
		commitT = append(commitT, ct.Seconds())
	}
	fmt.Printf("during a %d MiB commit (fsync %.2f s): worst stat of another version %.1f ms, 4 KiB read %.1f ms, ls versions/ %.1f ms (aim: a few ms)\n",
		o.latSize, mid(commitT), mid(worstStat)*1e3, mid(worstRead)*1e3, mid(worstLs)*1e3)
	return nil
}

func probeDuringCommit(mnt string, data []byte) (worstStat, worstRead, worstLs, commitTime time.Duration, err error) {
	other, err := os.Open(filepath.Join(mnt, "versions", "v0", "data"))
	if err != nil {
		return
	}
	defer other.Close()
	f, err := os.OpenFile(filepath.Join(mnt, "versions", "v1", "data"), os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer f.Close()
	for off := 0; off < len(data); off += 1 << 20 {
		if _, err = f.WriteAt(data[off:min(off+1<<20, len(data))], int64(off)); err != nil {
			return
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var probeErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewSource(1))
		buf := make([]byte, 4096)
		timed := func(worst *time.Duration, fn func() error) bool {
			t := time.Now()
			if e := fn(); e != nil {
				probeErr = e
				return false
			}
			*worst = max(*worst, time.Since(t))
			return true
		}
		for {
			select {
			case <-stop:
				return
			default:
			}
			ok := timed(&worstStat, func() error { _, e := os.Stat(other.Name()); return e }) &&
				timed(&worstRead, func() error {
					_, e := other.ReadAt(buf, rng.Int63n(int64(len(data))/4096)*4096)
					return e
				}) &&
				timed(&worstLs, func() error { _, e := os.ReadDir(filepath.Join(mnt, "versions")); return e })
			if !ok {
				return
			}
		}
	}()
	start := time.Now()
	err = f.Sync()
	commitTime = time.Since(start)
	close(stop)
	wg.Wait()
	if err == nil {
		err = probeErr
	}
	return
}

func midInt(v []int64) int64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
