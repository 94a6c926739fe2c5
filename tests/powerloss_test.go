package tests

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// TestPowerLoss simulates the machine losing power at random moments of a read-write
// mount's commits. The mount runs under strace, which records every write, truncation,
// fsync, journal creation and removal it makes; a crash state at a point k of that log is
// built as a disk would keep it: for each file, what its last fsync before k made durable,
// and past that, every 512-byte sector either as it was or as the writes before k left it,
// at either length; the journal's directory entry exists as its last directory fsync left
// it, or not. Then `vh5fs fsck --repair` runs on the crash state, and h5py must find exactly
// the versions of the original file plus the first j commits, for some j at least the
// number of commits that had passed their commit point (their journal and its directory
// entry fsynced) — so every commit whose fsync had returned too — every one of them
// byte-identical to what the mount committed; fsck must find nothing wrong. Before the
// repair, h5py reads the crash state as any program would: every version it reads as
// committed must be byte-identical to the original's or a commit's.
//
// Two files: a reference one, whose mapping lists libhdf5 writes, and one of 300 chunks,
// whose lists vh5fs writes itself (h5/mappings.go).
func TestPowerLoss(t *testing.T) {
	if _, err := exec.LookPath("strace"); err != nil {
		t.Skip("strace not installed")
	}
	trials := 40
	if os.Getenv("VH5FS_SOAK") != "" {
		trials = 1000
	}
	for _, tc := range []struct {
		name, dataset string
		file          func(t *testing.T) string
	}{
		{"fixture", "temp", func(t *testing.T) string { return fixture.Copy(t, "testdata/fixtures/grid_2d_gzip.h5") }},
		{"300 chunks", "data", func(t *testing.T) string {
			return makeVersioned(t, "--shape", "600,37", "--chunks", "8,10", "--gzip")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { powerLoss(t, tc.file(t), tc.dataset, trials) })
	}
}

// powerLoss is TestPowerLoss on a copy of src, committing to dataset.
func powerLoss(t *testing.T, src, dataset string, trials int) {
	dir := t.TempDir()
	file := filepath.Join(dir, "run.h5")
	require.NoError(t, os.Rename(src, file))
	initial, err := os.ReadFile(file)
	require.NoError(t, err)
	before := versionDigests(t, file)

	// The commits, under strace.
	mnt := filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	trace := filepath.Join(dir, "trace")
	m := startMount(t, mnt, append([]string{"strace", "-f", "-qq", "-y", "-s", "0", "-e", "write=all", "-o", trace,
		"-e", "trace=pwrite64,write,fsync,fdatasync,ftruncate,openat,unlink,unlinkat,rename"},
		vh5fsArgs(file, mnt, "rw")...))
	rng := rand.New(rand.NewSource(1))
	const commits = 6
	for i := 0; i < commits; i++ {
		f, err := os.OpenFile(filepath.Join(mnt, "current", dataset), os.O_RDWR, 0)
		require.NoError(t, err)
		st, err := f.Stat()
		require.NoError(t, err)
		b := make([]byte, 8*(1+rng.Intn(400)))
		rng.Read(b)
		off := int64(8 * rng.Intn(int(st.Size()/8)+40)) // sometimes past the end: the dataset grows
		_, err = f.WriteAt(b, off)
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
	}
	m.unmount(t)
	after := versionDigests(t, file)
	order := commitOrder(before, after)
	require.Len(t, order, commits, "every fsync committed a version")

	ops := parseTrace(t, trace, file)
	cycles := 0
	for _, op := range ops {
		if op.kind == "unlink" {
			cycles++
		}
	}
	require.GreaterOrEqual(t, cycles, commits, "each commit's sync went through the journal")

	survived, forward, unreadable := 0, 0, 0
	var known []string // every version's lines, as the original file and the commits made them
	for v, l := range after {
		if v != "current" {
			known = append(known, l...)
		}
	}
	for trial := 0; trial < trials; trial++ {
		k := rng.Intn(len(ops) + 1)
		img, journal, acked := crashState(ops[:k], initial, rng)
		// The crash state goes into the file's own inode, which its journal names.
		crash := file
		w, err := os.OpenFile(crash, os.O_WRONLY|os.O_TRUNC, 0)
		require.NoError(t, err)
		_, err = w.Write(img)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		os.Remove(crash + ".vh5fs-journal")
		if journal != nil {
			require.NoError(t, os.WriteFile(crash+".vh5fs-journal", journal, 0o600))
		}
		// Before any repair, as any program would: every version h5py reads as committed
		// is one the original file or a commit holds, exactly. With a journal beside the
		// file, a crash in the apply may have kept part of the body's sectors, and h5py may
		// fail to read what they make (never the publish without the whole body).
		lines, failed := committedLines(t, crash)
		for _, l := range lines {
			require.Contains(t, known, l, "trial %d (crash after %d of %d operations): before repair, h5py reads a version as no commit wrote it", trial, k, len(ops))
		}
		if failed != nil {
			require.NotNil(t, journal, "trial %d (crash after %d of %d operations): no journal, yet h5py cannot read the file: %s", trial, k, len(ops), failed)
			unreadable++
		}
		if journal != nil { // until it is recovered, read-only opens refuse the file
			out, err := exec.Command(vh5fsBin, "ls", crash).CombinedOutput()
			require.Error(t, err)
			require.Contains(t, string(out), "a commit was interrupted while writing", "trial %d", trial)
		}
		out, err := exec.Command(vh5fsBin, "fsck", "--repair", crash).CombinedOutput()
		require.NoError(t, err, "trial %d (crash after %d of %d operations): fsck --repair: %s", trial, k, len(ops), out)
		got := versionDigests(t, crash)
		j := matchPrefix(t, before, after, order, got)
		require.GreaterOrEqual(t, j, min(acked, commits), "trial %d: a commit past its commit point is lost", trial)
		if j > acked {
			forward++
		}
		survived++
	}
	t.Logf("%d of %d simulated power losses (over %d logged operations, %d journal cycles) kept every version and every commit past its commit point (%d kept a commit the disk had not yet made sure of); before repair, h5py read nothing wrong (%d states with a journal it could not read whole)", survived, trials, len(ops), cycles, forward, unreadable)
}

// versionDigests is tests/py/version_digests.py's output: version -> its lines, and the
// current version under "current".
func versionDigests(t *testing.T, file string) map[string][]string {
	out, err := exec.Command(python(t), "py/version_digests.py", file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	m := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		m[f[0]] = append(m[f[0]], l)
	}
	return m
}

// commitOrder lists the versions after has and before has not, parents first.
func commitOrder(before, after map[string][]string) []string {
	var order []string
	for v, lines := range after {
		if _, ok := before[v]; !ok && v != "current" {
			order = append(order, v+" "+strings.Fields(lines[0])[1])
		}
	}
	// Each new version's parent is the one before it: sort by following the chain.
	var chain []string
	cur := strings.Fields(before["current"][0])[1]
	for len(chain) < len(order) {
		found := false
		for _, o := range order {
			f := strings.Fields(o)
			if f[1] == cur {
				chain = append(chain, f[0])
				cur = f[0]
				found = true
				break
			}
		}
		if !found {
			break
		}
	}
	return chain
}

// matchPrefix checks that got is before plus the first j commits of order, each as after
// has it, and returns j.
func matchPrefix(t *testing.T, before, after map[string][]string, order []string, got map[string][]string) int {
	j := 0
	for j < len(order) && got[order[j]] != nil {
		j++
	}
	want := map[string][]string{}
	for v, l := range before {
		want[v] = l
	}
	for _, v := range order[:j] {
		want[v] = after[v]
	}
	if j > 0 {
		want["current"] = []string{"current " + order[j-1]}
	}
	require.Equal(t, sortedLines(want), sortedLines(got), "the versions after recovery are the original ones plus the first %d commits", j)
	return j
}

func sortedLines(m map[string][]string) []string {
	var out []string
	for _, l := range m {
		out = append(out, l...)
	}
	slices.Sort(out)
	return out
}

// ioOp is one logged operation of the mount on the HDF5 file ("data"), its journal
// ("journal") or their directory ("dir").
type ioOp struct {
	kind   string // write, truncate, fsync, create, unlink
	target string // data, journal, dir
	off    int64  // write: offset; truncate: length
	data   []byte
}

var (
	traceCall   = regexp.MustCompile(`^\d+ +(\w+)\((.*?)(?:\) += (-?\d+)| <unfinished \.\.\.>)`)
	traceResume = regexp.MustCompile(`^(\d+) +<\.\.\. (\w+) resumed>.*\) += (-?\d+)`)
	traceFd     = regexp.MustCompile(`^\d+<([^>]*)>`)
)

// parseTrace reads strace's log of the mount into the operations on file, its journal and
// their directory, in order. Data follows each write as a hex dump.
func parseTrace(t *testing.T, trace, file string) []ioOp {
	f, err := os.Open(trace)
	require.NoError(t, err)
	defer f.Close()
	journal, dir := file+".vh5fs-journal", filepath.Dir(file)
	targetOf := func(path string) string {
		switch path {
		case file:
			return "data"
		case journal:
			return "journal"
		case dir:
			return "dir"
		}
		return ""
	}
	var ops []ioOp
	pending := map[string]string{} // pid -> the arguments of an unfinished call
	var last *ioOp                 // the write the next hex dump lines belong to
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, " | ") {
			if last != nil && len(line) >= 59 {
				b, err := hex.DecodeString(strings.ReplaceAll(line[10:59], " ", ""))
				require.NoError(t, err, line)
				last.data = append(last.data, b...)
			}
			continue
		}
		last = nil
		pid, _, _ := strings.Cut(line, " ")
		var name, args, ret string
		if m := traceResume.FindStringSubmatch(line); m != nil {
			name, args, ret = m[2], pending[m[1]], m[3]
			delete(pending, m[1])
		} else if m := traceCall.FindStringSubmatch(line); m != nil {
			name, args, ret = m[1], m[2], m[3]
			if ret == "" {
				pending[pid] = args
				continue
			}
		} else {
			continue
		}
		if strings.HasPrefix(ret, "-") {
			continue // failed calls change nothing
		}
		fields := strings.Split(args, ", ")
		var target string
		if m := traceFd.FindStringSubmatch(fields[0]); m != nil {
			target = targetOf(m[1])
		}
		switch name {
		case "pwrite64":
			if target == "data" || target == "journal" {
				off, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
				require.NoError(t, err, line)
				ops = append(ops, ioOp{kind: "write", target: target, off: off})
				last = &ops[len(ops)-1]
			}
		case "ftruncate":
			if target == "data" || target == "journal" {
				n, err := strconv.ParseInt(fields[1], 10, 64)
				require.NoError(t, err, line)
				ops = append(ops, ioOp{kind: "truncate", target: target, off: n})
			}
		case "fsync", "fdatasync":
			if target != "" {
				ops = append(ops, ioOp{kind: "fsync", target: target})
			}
		case "openat":
			if strings.Contains(args, ".vh5fs-journal") && strings.Contains(args, "O_CREAT") {
				ops = append(ops, ioOp{kind: "create", target: "journal"})
			}
		case "unlink", "unlinkat":
			if strings.Contains(args, ".vh5fs-journal") {
				ops = append(ops, ioOp{kind: "unlink", target: "journal"})
			}
		}
	}
	require.NoError(t, sc.Err())
	for i, op := range ops {
		if op.kind == "write" {
			require.NotEmpty(t, op.data, "operation %d: write without its data", i)
		}
	}
	return ops
}

// image is a file's bytes as a sequence of operations leaves them.
type image struct{ b []byte }

func (im *image) apply(op ioOp) {
	switch op.kind {
	case "write":
		if end := op.off + int64(len(op.data)); end > int64(len(im.b)) {
			im.b = append(im.b, make([]byte, end-int64(len(im.b)))...)
		}
		copy(im.b[op.off:], op.data)
	case "truncate":
		if op.off < int64(len(im.b)) {
			im.b = im.b[:op.off]
		} else {
			im.b = append(im.b, make([]byte, op.off-int64(len(im.b)))...)
		}
	case "create":
		im.b = im.b[:0]
	}
}

// crashState builds what a disk may hold after ops: see TestPowerLoss. acked is the number
// of commits that had passed their commit point: a directory fsync after their journal's
// creation and its fsync — or whose whole journal the crash state holds.
func crashState(ops []ioOp, initial []byte, rng *rand.Rand) (data, journal []byte, acked int) {
	data = dataState(ops, initial, rng)

	// The journal's name: exists if created and not removed, as far as directory fsyncs
	// made either durable; in between, either way.
	exists, sure, journaled := false, true, false
	for _, op := range ops {
		switch {
		case op.target == "journal" && op.kind == "create":
			exists, sure, journaled = true, false, false
		case op.target == "journal" && op.kind == "fsync":
			journaled = exists
		case op.target == "journal" && op.kind == "unlink":
			exists, sure, journaled = false, false, false
		case op.target == "dir" && op.kind == "fsync":
			sure = true
			if journaled {
				acked++
				journaled = false
			}
		}
	}
	if !sure && rng.Intn(2) == 0 {
		exists = !exists
	}
	if exists {
		// Its contents since its last creation.
		last := 0
		for i, op := range ops {
			if op.target == "journal" && op.kind == "create" {
				last = i
			}
		}
		journal = stateFrom(ops[last:], rng)
		_, whole, _ := durableAndLatest(ops[last:], "journal", nil)
		if creates := countOps(ops[:last+1], "journal", "create"); len(journal) > 0 && bytes.Equal(journal, whole) {
			acked = max(acked, creates) // written whole after the file's fsync: it replays
		}
	}
	return data, journal, acked
}

// countOps counts the operations of kind on target.
func countOps(ops []ioOp, target, kind string) int {
	n := 0
	for _, op := range ops {
		if op.target == target && op.kind == kind {
			n++
		}
	}
	return n
}

// dataState is the HDF5 file after ops: what its last fsync made durable and, past that,
// each 512-byte sector as it was or as the later writes left it, at either length.
func dataState(ops []ioOp, initial []byte, rng *rand.Rand) []byte {
	durable, latest, pending := durableAndLatest(ops, "data", initial)
	if !pending {
		return durable
	}
	n := len(durable)
	if rng.Intn(2) == 0 {
		n = len(latest)
	}
	out := make([]byte, n)
	for s := 0; s < n; s += 512 {
		src := durable
		if rng.Intn(2) == 0 {
			src = latest
		}
		if s < len(src) {
			copy(out[s:min(s+512, n)], src[s:min(s+512, len(src))])
		}
	}
	return out
}

// stateFrom is the journal after ops (from its creation on): what its fsync made durable,
// or, before that, any prefix of what was written.
func stateFrom(ops []ioOp, rng *rand.Rand) []byte {
	durable, latest, pending := durableAndLatest(ops, "journal", nil)
	if pending && rng.Intn(2) == 0 {
		return latest[:rng.Intn(len(latest)+1)]
	}
	return durable
}

// durableAndLatest applies target's operations to start: durable holds those before its
// last fsync, latest all of them; pending tells whether any came after that fsync.
func durableAndLatest(ops []ioOp, target string, start []byte) (durable, latest []byte, pending bool) {
	d, l := &image{b: bytes.Clone(start)}, &image{b: bytes.Clone(start)}
	var since []ioOp
	for _, op := range ops {
		if op.target != target {
			continue
		}
		if op.kind == "fsync" {
			for _, p := range since {
				d.apply(p)
			}
			since = since[:0]
			continue
		}
		l.apply(op)
		since = append(since, op)
	}
	return d.b, l.b, len(since) > 0
}
