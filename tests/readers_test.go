package tests

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/xattr"
	"github.com/stretchr/testify/require"
)

// History edits the writer of TestReadersSeeOneState makes between commits.
const (
	editRename     = "rename"     // mv versions/A versions/B, of current's version every other time
	editRevertLn   = "revert-ln"  // ln -sfn versions/X current
	editRevertAttr = "revert-set" // setfattr -n user.vh5fs.current -v X
	editDelete     = "delete"     // rmdir versions/X (-o allow_delete), X not current
)

// TestReadersSeeOneState: readers of a read-write mount (readlink current, ls versions/,
// a 4 KiB read of a version listed, stat, ls and a 4 KiB read of current/data) are never
// answered an error a healthy file does not have while commits and history edits run
// through the same mount: each request sees the file before a change or after it, never
// current_version of one state and the committed flags of another, and the bytes read are
// what some version holds. ENOENT (and ESTALE, to a directory open across the change) is
// allowed only to a request that overlapped a rename or deletion: a name it walked may
// have just gone away.
//
// VH5FS_READERS_COMMITS and VH5FS_READERS_EDITS set the load of each case (defaults: 200
// commits, 20 edits; the figure is 1000 and 100).
func TestReadersSeeOneState(t *testing.T) {
	commits := int(envInt(t, "VH5FS_READERS_COMMITS", 200))
	edits := int(envInt(t, "VH5FS_READERS_EDITS", 20))
	for _, tc := range []struct {
		name  string
		edits []string
	}{
		{name: "commits"},
		{name: "renames and reverts", edits: []string{editRename, editRevertLn, editRevertAttr}},
		{name: "deletions", edits: []string{editDelete}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.edits == nil {
				readersDuringCommits(t, commits, 0, nil)
			} else {
				readersDuringCommits(t, commits, edits, tc.edits)
			}
		})
	}
}

// readersDuringCommits runs the readers while the test commits n versions through
// current/data and makes edits history edits, kinds in turn, evenly among them.
func readersDuringCommits(t *testing.T, n, edits int, kinds []string) {
	const elems, readers = 1024, 3 // float64 elements of "data"
	file := filepath.Join(t.TempDir(), "data.h5")
	run(t, python(t), "py/make_versioned.py", file, "--shape", fmt.Sprint(elems), "--chunks", "256", "--versions", "4")
	m := mount(t, file, "rw,allow_delete")
	p := func(elem ...string) string { return filepath.Join(append([]string{m.Dir}, elem...)...) }

	// Every first 4 KiB a version of current/data may hold: the fixture's versions', and
	// each commit's, added before the commit starts.
	var knownMu sync.Mutex
	known := map[[32]byte]bool{}
	addKnown := func(b []byte) {
		knownMu.Lock()
		known[sha256.Sum256(b[:4096])] = true
		knownMu.Unlock()
	}
	isKnown := func(b []byte) bool {
		knownMu.Lock()
		defer knownMu.Unlock()
		return known[sha256.Sum256(b[:4096])]
	}
	live := []string{"v0", "v1", "v2", "v3"}
	for _, v := range live {
		b, err := os.ReadFile(p("versions", v, "data"))
		require.NoError(t, err)
		addKnown(b)
	}

	// editing is odd while a rename or deletion runs: it moves at its start and its end.
	var (
		editing, loops, vanished atomic.Int64
		stop                     atomic.Bool
		failMu                   sync.Mutex
		failures                 []string
	)
	fail := func(op string, err error) {
		failMu.Lock()
		failures = append(failures, op+": "+err.Error())
		failMu.Unlock()
	}
	var wg sync.WaitGroup
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			buf := make([]byte, 4096)
			for !stop.Load() {
				e0 := editing.Load()
				ok := func(op string, err error) bool {
					if err == nil {
						return true
					}
					// ESTALE: a directory opened before its version was renamed or deleted
					// (fsnode's staleOr; the kernel retries it only for path walks).
					gone := errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ESTALE)
					if gone && (e0%2 == 1 || editing.Load() != e0) {
						vanished.Add(1)
					} else {
						fail(op, err)
					}
					return false
				}
				target, err := os.Readlink(p("current"))
				if ok("readlink current", err) && !strings.HasPrefix(target, "versions/") {
					fail("readlink current", fmt.Errorf("target %q", target))
				}
				ents, err := os.ReadDir(p("versions"))
				if ok("ls versions", err) && len(ents) == 0 {
					fail("ls versions", errors.New("no versions listed"))
				}
				if len(ents) > 0 { // a version listed, most likely read for the first time
					v := ents[rng.IntN(len(ents))].Name()
					b, err := readHead(p("versions", v, "data"), buf)
					if ok("read versions/"+v+"/data", err) && (b != len(buf) || !isKnown(buf)) {
						fail("read versions/"+v+"/data", fmt.Errorf("%d bytes no version holds", b))
					}
				}
				ents, err = os.ReadDir(p("current"))
				if ok("ls current", err) && (len(ents) != 1 || ents[0].Name() != "data") {
					fail("ls current", fmt.Errorf("%d entries", len(ents)))
				}
				st, err := os.Stat(p("current", "data"))
				if ok("stat current/data", err) && st.Size() != 8*elems {
					fail("stat current/data", fmt.Errorf("size %d", st.Size()))
				}
				got, err := readHead(p("current", "data"), buf)
				if ok("read current/data", err) && (got != len(buf) || !isKnown(buf)) {
					fail("read current/data", fmt.Errorf("%d bytes no version holds, first element %v", got,
						math.Float64frombits(binary.LittleEndian.Uint64(buf))))
				}
				loops.Add(1)
			}
		}()
	}

	rng := rand.New(rand.NewPCG(7, uint64(n)))
	current := func() string {
		target, err := os.Readlink(p("current"))
		require.NoError(t, err)
		return strings.TrimPrefix(target, "versions/")
	}
	other := func(cur string) string { // a version other than cur
		for {
			if v := live[rng.IntN(len(live))]; v != cur {
				return v
			}
		}
	}
	// The handle that committed pins its base until the kernel releases it, which close
	// does not wait for: a rename or deletion answers EBUSY until then.
	busy := 0
	retryBusy := func(edit func() error) error {
		for try := 0; ; try++ {
			err := edit()
			if !errors.Is(err, syscall.EBUSY) || try == 100 {
				return err
			}
			busy++
			time.Sleep(10 * time.Millisecond)
		}
	}
	// edit makes one history edit of kind; rename and rmdir count as editing.
	edit := func(kind string, k int) {
		cur := current()
		switch kind {
		case editRename:
			from, to := cur, fmt.Sprintf("renamed%d", k)
			if k%2 == 1 {
				from = other(cur)
			}
			editing.Add(1)
			err := retryBusy(func() error { return os.Rename(p("versions", from), p("versions", to)) })
			editing.Add(1)
			require.NoError(t, err, "mv versions/%s versions/%s", from, to)
			live[slices.Index(live, from)] = to
		case editRevertLn:
			run(t, "ln", "-sfn", "versions/"+other(cur), p("current"))
		case editRevertAttr:
			require.NoError(t, xattr.Set(m.Dir, "user.vh5fs.current", []byte(other(cur))))
		case editDelete:
			v := other(cur)
			editing.Add(1)
			err := retryBusy(func() error { return syscall.Rmdir(p("versions", v)) })
			editing.Add(1)
			require.NoError(t, err, "rmdir versions/%s", v)
			live = slices.DeleteFunc(live, func(x string) bool { return x == v })
			if k%4 == 3 {
				// The mount compacts what deletions leave a second after the last one
				// (fsnode's reclaimQuiet), moving chunks while the readers read.
				editing.Add(1)
				time.Sleep(1500 * time.Millisecond)
				editing.Add(1)
			}
		}
	}

	payload := make([]byte, 8*elems)
	every := n + 1
	if edits > 0 {
		every = max(1, n/edits)
	}
	start, done := time.Now(), 0
	for i := range n {
		for j := 0; j < len(payload); j += 8 {
			binary.LittleEndian.PutUint64(payload[j:], math.Float64bits(float64(1000+i)))
		}
		addKnown(payload)
		f, err := os.OpenFile(p("current", "data"), os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteAt(payload, 0)
		require.NoError(t, err)
		require.NoError(t, f.Close(), "commit %d", i)
		live = append(live, current())
		if (i+1)%every == 0 && done < edits {
			edit(kinds[done%len(kinds)], done/len(kinds))
			done++
		}
	}
	elapsed := time.Since(start)
	stop.Store(true)
	wg.Wait()

	t.Logf("%d commits and %d history edits %v in %v (edits retried on EBUSY: %d); %d reader loops, %d ENOENT or ESTALE during renames and deletions, %d errors",
		n, done, kinds, elapsed.Round(time.Millisecond), busy, loops.Load(), vanished.Load(), len(failures))
	require.Empty(t, failures[:min(len(failures), 10)], "readers' errors (%d)", len(failures))
	require.NotContains(t, m.stderr.String(), "request failed", "the mount answered EIO")
	require.Equal(t, edits, done, "history edits made")
	require.Positive(t, loops.Load())

	// Every version left is listed and reads as one of the payloads.
	ents, err := os.ReadDir(p("versions"))
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, live, names)
	for _, v := range live {
		b, err := os.ReadFile(p("versions", v, "data"))
		require.NoError(t, err)
		require.True(t, isKnown(b), "versions/%s/data", v)
	}
}

// readHead reads the first len(buf) bytes of the file at path into buf.
func readHead(path string, buf []byte) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return f.ReadAt(buf, 0)
}
