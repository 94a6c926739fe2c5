package tests

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkg/xattr"
	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/swmr"
)

// Live mounts (-o live). tests/py/swmr_writer.py is an h5py SWMR writer (libver="latest",
// swmr_mode=True) that appends to three datasets and flushes every step; readers through
// the mount check every value against the writer's function of its position.
// VH5FS_SOAK=1 runs many more steps.

func liveSteps() (steps int, pause string) {
	if os.Getenv("VH5FS_SOAK") != "" {
		return 20000, "0"
	}
	return 120, "0.01"
}

// swmrWriter is a running tests/py/swmr_writer.py.
type swmrWriter struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan string
	flushes []flushLine // after wait
	stderr  strings.Builder
}

type flushLine struct {
	step       int
	at         time.Time
	aBytes     int64
	bBytes     int64
	cRows      int64
	cCols      int64
	cBytes     int64
	observedAt time.Time
}

func startWriter(t *testing.T, file, mode string, steps int, pause string) *swmrWriter {
	t.Helper()
	w := &swmrWriter{cmd: exec.Command(python(t), "py/swmr_writer.py", file, mode, strconv.Itoa(steps), pause), lines: make(chan string, 1<<16)}
	w.cmd.Stderr = &w.stderr
	var err error
	w.stdin, err = w.cmd.StdinPipe()
	require.NoError(t, err)
	out, err := w.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, w.cmd.Start())
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
	}()
	select {
	case l := <-w.lines:
		require.Equal(t, "ready", l, "writer: %s", w.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("writer not ready: %s", w.stderr.String())
	}
	t.Cleanup(func() {
		if w.cmd.ProcessState == nil {
			w.cmd.Process.Kill()
			w.cmd.Wait()
		}
	})
	return w
}

// run lets the writer go and returns once it closed the file.
func (w *swmrWriter) run(t *testing.T) {
	t.Helper()
	_, err := io.WriteString(w.stdin, "go\n")
	require.NoError(t, err)
	closed := false
	for l := range w.lines {
		f := strings.Fields(l)
		switch {
		case len(f) == 7 && f[0] == "flush":
			var fl flushLine
			fl.step, _ = strconv.Atoi(f[1])
			sec, _ := strconv.ParseFloat(f[2], 64)
			fl.at = time.Unix(0, int64(sec*1e9))
			fl.aBytes, _ = strconv.ParseInt(f[3], 10, 64)
			fl.bBytes, _ = strconv.ParseInt(f[4], 10, 64)
			fl.cRows, _ = strconv.ParseInt(f[5], 10, 64)
			fl.cCols, _ = strconv.ParseInt(f[6], 10, 64)
			fl.cBytes = fl.cRows * fl.cCols * 8
			w.flushes = append(w.flushes, fl)
		case l == "closed":
			closed = true
		}
	}
	require.NoError(t, w.cmd.Wait(), "writer: %s", w.stderr.String())
	require.True(t, closed, "writer did not close the file: %s", w.stderr.String())
}

// The writer's values (tests/py/swmr_writer.py) and fill values.
func aValue(k int64) float64    { return float64(k + 1) }
func bValue(i, j int64) int32   { return int32(1000*i + j + 1) }
func cValue(i, j int64) float64 { return float64(10000*i + j + 1) }
func checkA(buf []byte, off int64) error {
	for k := int64(0); k+8 <= int64(len(buf)); k += 8 {
		pos := (off + k) / 8
		v := math.Float64frombits(binary.LittleEndian.Uint64(buf[k:]))
		if v != aValue(pos) && v != 0 {
			return fmt.Errorf("a[%d] = %v, want %v or fill 0", pos, v, aValue(pos))
		}
	}
	return nil
}

func checkB(buf []byte, off int64) error {
	for k := int64(0); k+4 <= int64(len(buf)); k += 4 {
		pos := (off + k) / 4
		i, j := pos/7, pos%7
		v := int32(binary.LittleEndian.Uint32(buf[k:]))
		if v != bValue(i, j) && v != 0 {
			return fmt.Errorf("b[%d,%d] = %v, want %v or fill 0", i, j, v, bValue(i, j))
		}
	}
	return nil
}

func checkC(buf []byte, off int64, cols int64) error {
	for k := int64(0); k+8 <= int64(len(buf)); k += 8 {
		pos := (off + k) / 8
		i, j := pos/cols, pos%cols
		v := math.Float64frombits(binary.LittleEndian.Uint64(buf[k:]))
		if v != cValue(i, j) && v != -1 {
			return fmt.Errorf("c[%d,%d] = %v, want %v or fill -1 (shape [_, %d])", i, j, v, cValue(i, j), cols)
		}
	}
	return nil
}

// liveReader reads one dataset file through one descriptor, opened before the writer
// starts, until stop: sizes must never shrink, every element must be the writer's or fill.
type liveReader struct {
	name   string
	sizes  map[int64]bool
	reads  int
	moved  int // c: shape changed during a read (not checked, read again)
	errors []string
}

func (r *liveReader) fail(format string, args ...any) {
	if len(r.errors) < 5 {
		r.errors = append(r.errors, fmt.Sprintf(format, args...))
	}
}

func readLive(path, name string, stop *atomic.Bool, done func(*liveReader)) {
	r := &liveReader{name: name, sizes: map[int64]bool{}}
	defer func() { done(r) }()
	f, err := os.Open(path)
	if err != nil {
		r.fail("open: %v", err)
		return
	}
	defer f.Close()
	var last int64
	for i := 0; ; i++ {
		finished := stop.Load() // one last pass after the writer closed
		st, err := f.Stat()
		if err != nil {
			r.fail("fstat: %v", err)
			return
		}
		size := st.Size()
		if size < last {
			r.fail("size shrank from %d to %d", last, size)
		}
		last = max(last, size)
		r.sizes[size] = true
		switch name {
		case "c":
			r.readC(f, path, i)
		default:
			// The bytes of a and b only ever grow at the end: read the tail, and now and
			// then everything; beyond the size stat gave may hold more (never less).
			lo := max(0, size-64<<10)
			if i%10 == 0 && size <= 4<<20 {
				lo = 0
			}
			buf := make([]byte, size-lo+4096)
			n, err := f.ReadAt(buf, lo)
			if err != nil && err != io.EOF {
				r.fail("read at %d: %v", lo, err)
				return
			}
			if int64(n) < size-lo {
				r.fail("read %d bytes at %d, stat said %d", n, lo, size)
			}
			check := checkA
			if name == "b" {
				check = checkB
			}
			if err := check(buf[:n], lo); err != nil {
				r.fail("%v", err)
			}
		}
		r.reads++
		if finished {
			return
		}
	}
}

// readC: the two-unlimited-dims dataset's bytes move when its second axis grows, so a read
// is checked against the shape when the shape (user.vh5fs.shape) is the same before and
// after it.
func (r *liveReader) readC(f *os.File, path string, i int) {
	shape := func() []int64 {
		v, err := xattr.FGet(f, "user.vh5fs.shape")
		if err != nil {
			r.fail("shape: %v", err)
			return nil
		}
		var s []int64
		json.Unmarshal(v, &s)
		return s
	}
	s1 := shape()
	if len(s1) != 2 || s1[1] == 0 {
		return
	}
	rows := s1[0]
	lo := max(0, rows-32) // the newest rows, and every tenth time all of them
	if i%10 == 0 && rows*s1[1]*8 <= 4<<20 {
		lo = 0
	}
	want := (rows - lo) * s1[1] * 8
	buf := make([]byte, want+8)
	n, err := f.ReadAt(buf, lo*s1[1]*8)
	if err != nil && err != io.EOF {
		r.fail("read: %v", err)
		return
	}
	s2 := shape()
	if len(s2) != 2 || s2[0] != s1[0] || s2[1] != s1[1] || int64(n) != want {
		r.moved++
		return
	}
	if err := checkC(buf[:n], lo*s1[1]*8, s1[1]); err != nil {
		r.fail("%v", err)
	}
}

// h5pyBytes reads a dataset with h5py (as a SWMR reader if swmr) and returns its bytes.
func h5pyBytes(t *testing.T, file, name string, swmrRead bool) []byte {
	t.Helper()
	mode := "False"
	if swmrRead {
		mode = "True"
	}
	return []byte(run(t, python(t), "-c", `
import sys, h5py
with h5py.File(sys.argv[1], "r", swmr=`+mode+`) as f:
    sys.stdout.buffer.write(f[sys.argv[2]][()].tobytes())
`, file, name))
}

func liveXattr(t *testing.T, mnt, name string) string {
	t.Helper()
	v, err := xattr.Get(mnt, name)
	require.NoError(t, err, name)
	return string(v)
}

// runLivePhase runs the writer while readers read through the mount, then checks that
// the mount equals h5py's read. It returns the flush-to-visible latencies of /c's size.
func runLivePhase(t *testing.T, file, mnt string, w *swmrWriter) []time.Duration {
	var stop atomic.Bool
	var mu sync.Mutex
	var readers []*liveReader
	var wg sync.WaitGroup
	for _, name := range []string{"a", "g/b", "c"} {
		wg.Add(1)
		go readLive(filepath.Join(mnt, name), filepath.Base(name), &stop, func(r *liveReader) {
			mu.Lock()
			readers = append(readers, r)
			mu.Unlock()
			wg.Done()
		})
	}
	// A stat poller: when does each new size of /c become visible by path?
	type seen struct {
		at   time.Time
		size int64
	}
	var seens []seen
	wg.Add(1)
	go func() {
		defer wg.Done()
		var last int64 = -1
		for !stop.Load() {
			st, err := os.Stat(filepath.Join(mnt, "c"))
			if err == nil && st.Size() != last {
				last = st.Size()
				seens = append(seens, seen{time.Now(), last})
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	require.Equal(t, "swmr-writing", liveXattr(t, mnt, "user.vh5fs.live.writer"))
	w.run(t)
	stop.Store(true)
	wg.Wait()

	for _, r := range readers {
		require.Empty(t, r.errors, "reader %s", r.name)
		t.Logf("reader %s: %d reads, %d distinct sizes, %d reads with a moving shape", r.name, r.reads, len(r.sizes), r.moved)
		require.GreaterOrEqual(t, len(r.sizes), 3, "reader %s saw the file grow only %d times", r.name, len(r.sizes)-1)
	}
	var lat []time.Duration
	for _, fl := range w.flushes {
		i := sort.Search(len(seens), func(i int) bool { return seens[i].size >= fl.cBytes })
		if i < len(seens) {
			lat = append(lat, seens[i].at.Sub(fl.at))
		}
	}

	// The writer closed the file: the mount says so, and equals h5py's read.
	require.Equal(t, "closed", liveXattr(t, mnt, "user.vh5fs.live.writer"))
	for _, name := range []string{"a", "g/b", "c"} {
		got, err := os.ReadFile(filepath.Join(mnt, name))
		require.NoError(t, err)
		want := h5pyBytes(t, file, name, false)
		require.Equal(t, len(want), len(got), name)
		require.True(t, string(want) == string(got), "%s differs from h5py's read", name)
	}
	return lat
}

func latencySummary(lat []time.Duration) string {
	if len(lat) == 0 {
		return "none"
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return fmt.Sprintf("n=%d median %v p90 %v max %v", len(lat), lat[len(lat)/2], lat[len(lat)*9/10], lat[len(lat)-1])
}

// TestLiveSWMR: an h5py SWMR writer appends while readers read through a live mount;
// then a second writer session opens the same file again while it is mounted.
func TestLiveSWMR(t *testing.T) {
	steps, pause := liveSteps()
	file := filepath.Join(t.TempDir(), "live.h5")
	w := startWriter(t, file, "create", steps, pause)
	mnt := mount(t, file, "live").Dir

	// Nothing stale from the kernel: a descriptor opened now, at size 0, follows.
	f, err := os.Open(filepath.Join(mnt, "a"))
	require.NoError(t, err)
	defer f.Close()
	st, err := f.Stat()
	require.NoError(t, err)
	require.Zero(t, st.Size())

	lat := runLivePhase(t, file, mnt, w)
	t.Logf("session 1: flush-to-visible latency of a new size (stat by path): %s", latencySummary(lat))
	buf := make([]byte, 16)
	n, err := f.ReadAt(buf, 8*100) // far past the size this descriptor saw at open
	require.NoError(t, err)
	require.NoError(t, checkA(buf[:n], 800))
	require.Equal(t, aValue(100), math.Float64frombits(binary.LittleEndian.Uint64(buf)))

	// A writer can open the file while it is mounted (the mount holds no lock), and the
	// mount follows the new session.
	w2 := startWriter(t, file, "append", max(steps/4, 20), pause)
	lat = runLivePhase(t, file, mnt, w2)
	t.Logf("session 2: flush-to-visible latency: %s", latencySummary(lat))

	var retries map[string]any
	require.NoError(t, json.Unmarshal([]byte(liveXattr(t, mnt, "user.vh5fs.live.retries")), &retries))
	t.Logf("retries: %s", liveXattr(t, mnt, "user.vh5fs.live.retries"))
	require.Contains(t, retries, "hdf5_metadata_reads_retried")
	ops := retries["operations"].(map[string]any)
	require.Zero(t, ops["failed"], "operations that failed every attempt")
}

// TestLiveMidWriteCopy: a copy of a file taken while a SWMR writer was writing (its
// superblock still flags SWMR writing and records an EOF behind the file's length) mounts
// and reads, live and not, and equals h5py's SWMR read of the copy.
func TestLiveMidWriteCopy(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "live.h5")
	w := startWriter(t, file, "create", 400, "0.002")
	_, err := io.WriteString(w.stdin, "go\n")
	require.NoError(t, err)
	copyPath := filepath.Join(dir, "copy.h5")
	var sb swmr.Superblock
	var length int64
	for n := 0; ; n++ {
		l := <-w.lines
		require.True(t, strings.HasPrefix(l, "flush"), "writer: %q %s", l, w.stderr.String())
		if n < 50 {
			continue
		}
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(copyPath, data, 0o644))
		sb, err = swmr.ReadSuperblock(strings.NewReader(string(data)), int64(len(data)))
		require.NoError(t, err)
		length = int64(len(data))
		break
	}
	for range w.lines {
	}
	require.NoError(t, w.cmd.Wait())
	t.Logf("copy: superblock v%d flags %#x EOF %d, file length %d", sb.Version, sb.Flags, sb.EOF, length)
	require.Equal(t, 3, sb.Version)
	require.NotZero(t, sb.Flags&swmr.FlagSWMRWrite)
	require.Less(t, int64(sb.EOF), length, "the copy's EOF is not behind its length")

	for _, opts := range [][]string{nil, {"live"}} {
		mnt := mount(t, copyPath, opts...)
		for _, name := range []string{"a", "g/b", "c"} {
			got, err := os.ReadFile(filepath.Join(mnt.Dir, name))
			require.NoError(t, err, "%v %s", opts, name)
			want := h5pyBytes(t, copyPath, name, true)
			require.Equal(t, len(want), len(got), "%v %s", opts, name)
			require.True(t, string(want) == string(got), "%v %s differs from h5py's SWMR read", opts, name)
			require.NotZero(t, len(got), name)
		}
		require.NoError(t, checkA(must(os.ReadFile(filepath.Join(mnt.Dir, "a"))), 0))
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestLiveNewVersions: another process commits a version to a versioned file mounted with
// -o live (the mount holds no lock, so it can); after it closes the file the version is
// listed under versions/, current follows, and a descriptor opened on an old version
// keeps reading it.
func TestLiveNewVersions(t *testing.T) {
	file := filepath.Join(t.TempDir(), "basic_1d.h5")
	data, err := os.ReadFile("testdata/fixtures/basic_1d.h5")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, data, 0o644))
	mnt := mount(t, file, "live")
	require.Equal(t, "versions/v4", must(os.Readlink(filepath.Join(mnt.Dir, "current"))))
	old, err := os.Open(filepath.Join(mnt.Dir, "versions/v4/x"))
	require.NoError(t, err)
	defer old.Close()
	v4 := must(io.ReadAll(old))
	require.Equal(t, "closed", liveXattr(t, mnt.Dir, "user.vh5fs.live.writer"))
	_, err = os.Stat(filepath.Join(mnt.Dir, "versions/v5"))
	require.True(t, os.IsNotExist(err)) // a negative entry the kernel must not keep

	for i, name := range []string{"v5", "v6"} {
		start := time.Now()
		run(t, python(t), "py/add_version.py", file, name)
		committed := time.Now()
		entries := must(os.ReadDir(filepath.Join(mnt.Dir, "versions")))
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		require.Contains(t, names, name, "versions/ after the commit")
		require.Len(t, names, 5+i)
		require.Equal(t, "versions/"+name, must(os.Readlink(filepath.Join(mnt.Dir, "current"))))
		require.Equal(t, name, liveXattr(t, mnt.Dir, "user.vh5fs.current_version"))
		got := must(os.ReadFile(filepath.Join(mnt.Dir, "current/x")))
		require.Equal(t, v4, got, "the new version copies v4")
		prev := liveXattr(t, filepath.Join(mnt.Dir, "versions", name), "user.vh5fs.prev_version")
		require.Equal(t, map[int]string{0: "v4", 1: "v5"}[i], prev)
		t.Logf("%s: committed in %v, visible %v after the committer exited", name, committed.Sub(start), time.Since(committed))
	}
	// The descriptor opened on v4 before the commits still reads v4.
	buf := make([]byte, len(v4))
	n, err := old.ReadAt(buf, 0)
	if err == io.EOF {
		err = nil
	}
	require.NoError(t, err)
	require.Equal(t, v4, buf[:n])
	var retries map[string]any
	require.NoError(t, json.Unmarshal([]byte(liveXattr(t, mnt.Dir, "user.vh5fs.live.retries")), &retries))
	require.EqualValues(t, 2, retries["reopens"])
}

// TestLiveOptions: live and rw do not mix.
func TestLiveOptions(t *testing.T) {
	cmd := exec.Command(vh5fsBin, "mount", "-o", "live,rw", "testdata/fixtures/basic_1d.h5", t.TempDir())
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "rw and live cannot be combined")
}
