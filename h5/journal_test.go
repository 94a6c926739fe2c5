package h5

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/hdf5"
)

// change makes the kind of change a commit makes: raw_data grows by a chunk (new bytes past
// the end, its chunk index rewritten in place) and a new group with an attribute, the sync's
// body (FlushBody); then, published after it, an attribute of the root rewritten in place.
func change(t *testing.T, f *File) {
	t.Helper()
	ds, err := f.OpenDataset("/_version_data/x/raw_data")
	require.NoError(t, err)
	defer ds.Close()
	rows, chunk := ds.Info().Shape[0], ds.Info().Chunks[0]
	require.NoError(t, ds.SetExtent([]int64{rows + chunk}))
	data := make([]byte, 8*chunk)
	for i := range chunk {
		binary.LittleEndian.PutUint64(data[8*i:], uint64(1000+i))
	}
	require.NoError(t, ds.WriteBox([]int64{rows}, []int64{chunk}, []int64{chunk}, []int64{0}, data))
	require.NoError(t, f.CreateGroup("/journal_test"))
	require.NoError(t, f.SetAttrString("/journal_test", "k", "v"))
	require.NoError(t, f.FlushBody())
	require.NoError(t, f.SetAttrInt64("/", "journal_test", 42))
}

// observed is what a reader sees of change: "old" (none of it), "body" (all but what was
// published after the body) or "new" (all of it), else a description of the mixture.
func observed(t *testing.T, path string) string {
	t.Helper()
	f, err := Open(path)
	require.NoError(t, err)
	defer f.Close()
	return observedIn(t, f)
}

// observedUnrecovered is observed for a file that may have a journal beside it, as another
// program sees it before anything recovers it: "not HDF5" for a file libhdf5 refuses.
func observedUnrecovered(t *testing.T, path string) string {
	t.Helper()
	lock()
	hf, err := hdf5.OpenFile(path, hdf5.F_ACC_RDONLY)
	unlock()
	if err != nil && GuardMarked(path) {
		return "not HDF5"
	}
	require.NoError(t, err)
	f := &File{path: path, f: hf}
	defer f.Close()
	return observedIn(t, f)
}

func observedIn(t *testing.T, f *File) string {
	ds, err := f.OpenDataset("/_version_data/x/raw_data")
	require.NoError(t, err)
	defer ds.Close()
	rows := ds.Info().Shape[0]
	kind, err := f.Kind("/journal_test")
	require.NoError(t, err)
	a, ok, err := f.Attr("/", "journal_test")
	require.NoError(t, err)
	switch {
	case rows == 24 && kind == KindMissing && !ok:
		return "old"
	case rows == 28 && kind == KindGroup:
		got := make([]byte, 16)
		require.NoError(t, ds.ReadBox([]int64{24}, []int64{2}, []int64{2}, []int64{0}, got))
		if binary.LittleEndian.Uint64(got) != 1000 || binary.LittleEndian.Uint64(got[8:]) != 1001 {
			break
		}
		if !ok {
			return "body"
		}
		if a.Value == int64(42) {
			return "new"
		}
	}
	return fmt.Sprintf("mixed: %d rows, group %s, attribute %v", rows, kind, ok)
}

// disk is a file's bytes and its journal's (nil if none), as they are on disk.
type disk struct{ file, journal []byte }

// snapshot reads what path and its journal hold now: what a process killed at this moment
// leaves on disk.
func snapshot(t *testing.T, path string) disk {
	t.Helper()
	var d disk
	var err error
	d.file, err = os.ReadFile(path)
	require.NoError(t, err)
	d.journal, err = os.ReadFile(path + JournalSuffix)
	if !errors.Is(err, os.ErrNotExist) {
		require.NoError(t, err)
	}
	return d
}

// restore puts d back at path, in the same inode (a journal names the inode it belongs to).
func restore(t *testing.T, path string, d disk) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	_, err = f.Write(d.file)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	os.Remove(path + JournalSuffix)
	if d.journal != nil {
		require.NoError(t, os.WriteFile(path+JournalSuffix, d.journal, 0o600))
	}
}

// openChanged opens a copy of basic_1d.h5 read-write and makes change in it, with a fault
// set for its next sync (and the driver's limits, if lim is not nil): the file and a
// function closing it.
func openChanged(t *testing.T, ft *fault, lim *limits) (string, *File, func() error) {
	t.Helper()
	path, f, src := openRW(t)
	if lim != nil {
		require.NoError(t, f.setHoldBudget(lim.budget, lim.piece))
	}
	change(t, f)
	if lim != nil && lim.budget == 0 {
		spilled, _, err := f.spilled()
		require.NoError(t, err)
		require.NotZero(t, spilled, "the change's held writes are spilled")
	}
	f.sync.fault = ft
	return path, f, func() error {
		src.Close()
		return f.Close()
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// faultWant is what a sync with a fault does: its error ("" for success), whether a journal
// is beside the file after it (and after close, if it failed), what another program sees
// before recovery, what Recover then does, and what a reader sees after recovery.
type faultWant struct {
	syncErr  string
	journal  bool
	seen     string
	recovery Recovery
	after    string
}

// TestJournalFaults injects a failure (EIO) and a crash (the process stops there) at every
// step of a sync, and checks the error, what the file on disk holds before recovery, that
// nothing more is written, and what recovery makes of it.
func TestJournalFaults(t *testing.T) {
	order := []syncStep{stepTail, stepFsync, stepJournal, stepJsync, stepDirsync, stepGuard, stepApply, stepBsync, stepPublish,
		stepAsync, stepUnguard, stepRemove}
	type want = faultWant
	before := want{"before its commit point", false, "old", RecoveryNone, "old"}
	after := func(seen string) want { return want{"after its commit point", true, seen, RecoveryReplayed, "new"} }
	cases := map[fault]want{
		{stepTail, false}:    before,
		{stepFsync, false}:   before,
		{stepJournal, false}: before,
		{stepJsync, false}:   before,
		{stepDirsync, false}: before,
		{stepApply, false}:   after("old"),
		{stepBsync, false}:   after("body"),
		{stepPublish, false}: after("body"),
		{stepAsync, false}:   {"after its commit point", true, "new", RecoveryApplied, "new"}, // applied, not fsynced
		{stepRemove, false}:  {"", true, "new", RecoveryNone, "new"},                          // durable: success; close's sync replaces the journal
		// A process killed before each step: the journal, once written, is whole in the
		// page cache, so from then on the commit survives. Another program never sees the
		// published attribute without the body.
		{stepTail, true}:    before,
		{stepFsync, true}:   before,
		{stepJournal, true}: before,
		{stepJsync, true}:   {"before its commit point", true, "old", RecoveryReplayed, "new"},
		{stepDirsync, true}: {"before its commit point", true, "old", RecoveryReplayed, "new"},
		{stepApply, true}:   after("old"),
		{stepBsync, true}:   after("body"),
		{stepPublish, true}: after("body"),
		{stepAsync, true}:   {"after its commit point", true, "new", RecoveryApplied, "new"},
		{stepRemove, true}:  {"after its commit point", true, "new", RecoveryApplied, "new"},
	}
	// A guarded sync (GuardSync): from the guard step on until the unguard step is done,
	// other programs find no HDF5 file; recovery completes it and writes the signature back.
	guarded := map[fault]want{}
	for ft, w := range cases {
		switch ft.step {
		case stepGuard, stepUnguard:
			continue
		case stepApply, stepBsync, stepPublish, stepAsync:
			w.seen = "not HDF5"
		}
		guarded[ft] = w
	}
	guarded[fault{stepGuard, false}] = after("old") // the mark's write fails
	guarded[fault{stepGuard, true}] = after("old")
	guarded[fault{stepApply, true}] = after("not HDF5")
	guarded[fault{stepUnguard, false}] = want{"after its commit point", true, "not HDF5", RecoveryApplied, "new"}
	guarded[fault{stepUnguard, true}] = want{"after its commit point", true, "not HDF5", RecoveryApplied, "new"}
	for _, v := range variants {
		for _, guard := range []bool{false, true} {
			for _, crash := range []bool{false, true} {
				for _, step := range order {
					ft := fault{step, crash}
					w, ok := cases[ft]
					if guard {
						w, ok = guarded[ft]
					}
					if !ok {
						continue // a step only guarded syncs have
					}
					name := v.name + "/" + map[bool]string{false: "", true: "guarded "}[guard] + steps[step].what +
						map[bool]string{false: " fails", true: " crash"}[crash]
					t.Run(name, func(t *testing.T) {
						faultRun(t, v.lim, v.recoverPiece, ft, guard, w)
					})
				}
			}
		}
	}
}

// faultRun makes change in a copy of basic_1d.h5 (guarded, or not), syncs it with fault ft,
// and checks what w says of the sync, the file before recovery, the recovery and after.
func faultRun(t *testing.T, lim *limits, recoverPiece int, ft fault, guard bool, w faultWant) {
	setRecoverPiece(recoverPiece)
	defer setRecoverPiece(0)
	open := openFiles()
	path, f, closeFile := openChanged(t, &ft, lim)
	if guard {
		require.NoError(t, f.GuardSync())
	}
	err := f.FlushSync()
	if w.syncErr == "" {
		require.NoError(t, err)
		require.NoError(t, f.Stopped())
	} else {
		require.ErrorIs(t, err, ErrStopped)
		require.ErrorContains(t, err, w.syncErr)
		require.ErrorIs(t, f.Stopped(), ErrStopped, "a commit asks before it writes")
	}
	require.Equal(t, w.journal, exists(path+JournalSuffix), "journal beside the file")
	was := snapshot(t, path)
	if w.syncErr != "" {
		// Fail-stop: nothing more reaches the file, not even at close.
		f.SetAttrInt64("/", "later", 1) // may stay in libhdf5's cache
		require.ErrorIs(t, f.FlushSync(), ErrStopped)
	}
	err = closeFile()
	if w.syncErr != "" {
		require.ErrorIs(t, err, ErrStopped, "the close reports the stop")
		require.Equal(t, was, snapshot(t, path), "the file or its journal changed after the failure")
	} else {
		require.NoError(t, err)
	}
	require.Equal(t, open, openFiles(), "libhdf5 lets go of the file at its close")
	require.Equal(t, w.seen, observedUnrecovered(t, path), "before recovery")
	if w.journal && w.syncErr != "" {
		_, err := Open(path)
		require.ErrorIs(t, err, ErrInterruptedCommit, "read-only opens refuse a file with a journal")
	}
	rec, err := Recover(path)
	require.NoError(t, err)
	require.Equal(t, w.recovery, rec)
	require.False(t, exists(path+JournalSuffix), "recovery removes the journal")
	require.Equal(t, w.after, observed(t, path))
	rec, err = Recover(path)
	require.NoError(t, err)
	require.Equal(t, RecoveryNone, rec, "recovery is idempotent")
}

// variants run a test with the journal driver's defaults, and with every held byte spilled
// and every step and recovery streaming the smallest pieces.
var variants = []struct {
	name         string
	lim          *limits
	recoverPiece int
}{
	{"default", nil, 0},
	{"spilled", &limits{0, 1}, 1},
}

// crashed returns a file as a process killed just before the apply step leaves it (the
// journal complete, the file not yet changed below its old end), that state, and the file
// as the finished sync leaves it.
func crashed(t *testing.T, lim *limits, guard bool) (path string, atApply disk, done []byte) {
	t.Helper()
	path, f, closeFile := openChanged(t, &fault{stepApply, true}, lim)
	if guard {
		require.NoError(t, f.GuardSync())
	}
	require.Error(t, f.FlushSync())
	closeFile()
	atApply = snapshot(t, path)
	rec, err := Recover(path)
	require.NoError(t, err)
	require.Equal(t, RecoveryReplayed, rec)
	done, err = os.ReadFile(path)
	require.NoError(t, err)
	restore(t, path, atApply)
	return path, atApply, done
}

// withBody is d's file with the body of its journal applied, as the apply step leaves it.
func withBody(t *testing.T, d disk) []byte {
	t.Helper()
	j := d.journal
	require.Equal(t, "VH5REDO3", string(j[:8]))
	word := func(off int) int { return int(binary.NativeEndian.Uint64(j[off:])) }
	out := bytes.Clone(d.file)
	off := 8 + 8*8
	for range word(8 + 8*4) {
		addr, n := word(off), word(off+8)
		copy(out[addr:addr+n], j[off+16+n:off+16+2*n])
		off += 16 + 2*n
	}
	return out
}

// TestJournalTornStates: a journal cut short is never acted on; a file whose overwritten
// ranges hold any mixture of old sectors, sectors as the body left them and new ones (a
// power loss in the apply or the publish) is completed.
func TestJournalTornStates(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			setRecoverPiece(v.recoverPiece)
			defer setRecoverPiece(0)
			tornStates(t, v.lim, false)
			tornStates(t, v.lim, true)
		})
	}
}

func tornStates(t *testing.T, lim *limits, guard bool) {
	path, atApply, applied := crashed(t, lim, guard)
	require.Equal(t, guard, GuardMarked(path), "a guarded sync marks the file before its apply")
	body := withBody(t, atApply)
	require.NotEqual(t, atApply.file, body, "the body changes the file")
	require.NotEqual(t, applied[:len(body)], body, "the publish changes the file")
	rng := rand.New(rand.NewSource(1))
	for trial := range 20 {
		// The journal cut anywhere, or one byte of it flipped: incomplete, removed. (The
		// file is marked only once its journal is durable: here it is as before the guard.)
		torn := disk{bytes.Clone(atApply.file), bytes.Clone(atApply.journal)}
		if guard {
			copy(torn.file, "\x89HDF\r\n\x1a\n")
		}
		if trial%2 == 0 {
			torn.journal = torn.journal[:rng.Intn(len(torn.journal))]
		} else {
			torn.journal[rng.Intn(len(torn.journal))] ^= 0x40
		}
		restore(t, path, torn)
		rec, err := Recover(path)
		require.NoError(t, err)
		require.Equal(t, RecoveryIncomplete, rec, "trial %d", trial)
		require.Equal(t, "old", observed(t, path))

		// The file's sectors each old, as the body left them, or new: completed.
		img := bytes.Clone(atApply.file)
		for s := 0; s < min(len(img), len(applied)); s += 512 {
			switch rng.Intn(3) {
			case 1:
				copy(img[s:min(s+512, len(applied))], body[s:min(s+512, len(applied))])
			case 2:
				copy(img[s:min(s+512, len(applied))], applied[s:min(s+512, len(applied))])
			}
		}
		restore(t, path, disk{img, atApply.journal})
		rec, err = Recover(path)
		require.NoError(t, err)
		require.Contains(t, []Recovery{RecoveryReplayed, RecoveryApplied}, rec, "trial %d", trial)
		require.Equal(t, "new", observed(t, path))
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		require.True(t, bytes.Equal(applied, got), "trial %d: replay leaves the file as the sync would have", trial)
	}
}

// TestJournalOtherWriter: another program (h5py) writes to the file between the crash and
// the recovery. Recovery then writes nothing, keeps the journal, and says what happened;
// read-write opens refuse the file; discarding the journal keeps the other program's data.
func TestJournalOtherWriter(t *testing.T) {
	python := "/usr/bin/python3"
	atApply, _, _ := crashed(t, nil, false)
	out, err := exec.Command(python, "-c", `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    f["other_program"] = np.arange(100.0)
    f.attrs["other"] = "was here"
`, atApply).CombinedOutput()
	require.NoError(t, err, "%s", out)
	theirs, err := os.ReadFile(atApply)
	require.NoError(t, err)

	_, err = Recover(atApply)
	require.ErrorIs(t, err, ErrJournalConflict)
	require.ErrorContains(t, err, atApply+": the file changed since")
	require.ErrorContains(t, err, "fsck --repair --discard-journal "+atApply)
	_, err = OpenRW(atApply)
	require.ErrorIs(t, err, ErrJournalConflict)
	_, err = Open(atApply)
	require.ErrorIs(t, err, ErrInterruptedCommit)
	got, err := os.ReadFile(atApply)
	require.NoError(t, err)
	require.True(t, bytes.Equal(theirs, got), "the other program's bytes are untouched")
	require.True(t, exists(atApply+JournalSuffix), "the journal stays")

	found, err := DiscardJournal(atApply)
	require.NoError(t, err)
	require.True(t, found)
	require.False(t, exists(atApply+JournalSuffix))
	out, err = exec.Command(python, "-c", `
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    print(f["other_program"][99], f.attrs["other"], "journal_test" in f)
`, atApply).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "99.0 was here False", strings.TrimSpace(string(out)))
}

// TestJournalReplacedFile: a journal whose file was replaced (another inode, same name) is
// not replayed over it.
func TestJournalReplacedFile(t *testing.T) {
	atApply, _, _ := crashed(t, nil, false)
	b, err := os.ReadFile(atApply)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(atApply+".new", b, 0o644)) // a new inode while the old one lives
	require.NoError(t, os.Rename(atApply+".new", atApply))
	_, err = Recover(atApply)
	require.ErrorIs(t, err, ErrJournalConflict)
	got, err := os.ReadFile(atApply)
	require.NoError(t, err)
	require.True(t, bytes.Equal(b, got))
}

// TestJournalCommitsInARow: syncs in a row through one open, then a reopen: every change is
// there, and no journal is left.
func TestJournalCommitsInARow(t *testing.T) {
	path, f, src := openRW(t)
	require.NoError(t, src.Close())
	for i := range 5 {
		require.NoError(t, f.SetAttrInt64("/", "n", int64(i)))
		require.NoError(t, f.CreateGroup("/g"+string(rune('0'+i))))
		require.NoError(t, f.FlushSync())
		require.False(t, exists(path+JournalSuffix))
	}
	require.NoError(t, f.Close())
	g, err := Open(path)
	require.NoError(t, err)
	defer g.Close()
	a, ok, err := g.Attr("/", "n")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(4), a.Value)
	for i := range 5 {
		k, err := g.Kind("/g" + string(rune('0'+i)))
		require.NoError(t, err)
		require.Equal(t, KindGroup, k)
	}
}

// legacyJournal is an undo journal as earlier versions of vh5fs wrote it: the file's length
// at the last sync, then per range its old bytes, then an FNV-1a hash of all that.
func legacyJournal(base uint64, off uint64, old []byte) []byte {
	j := []byte("VH5UNDO1")
	j = binary.NativeEndian.AppendUint64(j, base)
	j = binary.NativeEndian.AppendUint64(j, 1)
	j = binary.NativeEndian.AppendUint64(j, off)
	j = binary.NativeEndian.AppendUint64(j, uint64(len(old)))
	j = append(j, old...)
	h := uint64(14695981039346656037)
	for _, b := range j {
		h = (h ^ uint64(b)) * 1099511628211
	}
	return binary.NativeEndian.AppendUint64(j, h)
}

// TestLegacyJournal: an earlier version's undo journal makes read-write opens refuse the
// file; an explicit Recover rolls it back as those versions did; one cut short is removed
// and the file left alone.
func TestLegacyJournal(t *testing.T) {
	path := copyFixture(t, "basic_1d.h5")
	orig, err := os.ReadFile(path)
	require.NoError(t, err)
	torn := bytes.Clone(orig)
	copy(torn[100:116], bytes.Repeat([]byte{0xff}, 16))
	torn = append(torn, make([]byte, 512)...) // what the interrupted sync appended
	journal := legacyJournal(uint64(len(orig)), 100, orig[100:116])
	undo := path + legacySuffix

	for _, cut := range []bool{true, false} {
		require.NoError(t, os.WriteFile(path, torn, 0o644))
		j := journal
		if cut {
			j = j[:len(j)-3]
		}
		require.NoError(t, os.WriteFile(undo, j, 0o600))
		_, err = Open(path)
		require.ErrorIs(t, err, ErrInterruptedCommit)
		_, err = OpenRW(path)
		require.ErrorIs(t, err, ErrLegacyJournal)
		rec, err := Recover(path)
		require.NoError(t, err)
		require.False(t, exists(undo), "the undo journal is removed")
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		if cut {
			require.Equal(t, RecoveryIncomplete, rec)
			require.True(t, bytes.Equal(torn, got), "a journal cut short is never acted on")
		} else {
			require.Equal(t, RecoveryRolledBack, rec)
			require.True(t, bytes.Equal(orig, got), "rolled back to the last sync")
		}
	}
}

// TestStartWriteback: starting the writeback of a change not yet synced leaves the sync
// and what it makes as they were.
func TestStartWriteback(t *testing.T) {
	path, f, src := openRW(t)
	require.NoError(t, src.Close())
	change(t, f)
	require.NoError(t, f.StartWriteback())
	require.NoError(t, f.FlushSync())
	require.NoError(t, f.StartWriteback())
	require.NoError(t, f.Close())
	require.Equal(t, "new", observed(t, path))
}

// TestJournalEarlierFormat: a journal of an earlier vh5fs (VH5REDO1: one part, six header
// words) left by a crash is still completed.
func TestJournalEarlierFormat(t *testing.T) {
	for _, tc := range []struct {
		magic string
		words int    // of the header
		seen  string // after recovery
	}{
		{"VH5REDO1", 6, "body"}, // no publish part: the body's ranges alone
		{"VH5REDO2", 7, "new"},  // no guard word
	} {
		t.Run(tc.magic, func(t *testing.T) {
			path, atApply, _ := crashed(t, nil, false)
			j := atApply.journal
			word := func(off int) uint64 { return binary.NativeEndian.Uint64(j[off:]) }
			end := 8 + 8*8 // the ranges' end: the body's, or the publish's too
			n := word(8 + 8*4)
			if tc.words == 7 {
				n += word(8 + 8*6)
			}
			for range n {
				end += 16 + 2*int(word(end+8))
			}
			old := append([]byte(tc.magic), j[8:8+8*tc.words]...)
			old = append(old, j[8+8*8:end]...)
			binary.NativeEndian.PutUint64(old[8+8*5:], uint64(len(old)+8))
			old = binary.NativeEndian.AppendUint32(old, crc32.ChecksumIEEE(old))
			old = binary.NativeEndian.AppendUint32(old, 0)
			restore(t, path, disk{atApply.file, old})
			rec, err := Recover(path)
			require.NoError(t, err)
			require.Equal(t, RecoveryReplayed, rec)
			require.Equal(t, tc.seen, observed(t, path))
		})
	}
}

// TestGuardWithoutJournal: a file a guarded sync left marked, whose journal is gone, is
// refused with an error that says so; with the journal, read-only opens refuse it as any
// file with a journal, and recovery completes it.
func TestGuardWithoutJournal(t *testing.T) {
	path, f, closeFile := openChanged(t, &fault{stepPublish, true}, nil)
	require.NoError(t, f.GuardSync())
	require.Error(t, f.FlushSync())
	closeFile()
	require.True(t, GuardMarked(path))
	_, err := Open(path)
	require.ErrorIs(t, err, ErrInterruptedCommit)
	was := snapshot(t, path)
	require.NoError(t, os.Remove(path+JournalSuffix))
	for _, open := range []func(string) (*File, error){Open, OpenRW} {
		_, err = open(path)
		require.ErrorIs(t, err, ErrGuardWithoutJournal)
		require.ErrorContains(t, err, path+JournalSuffix+", which alone can complete it, is gone")
	}
	restore(t, path, was)
	rec, err := Recover(path)
	require.NoError(t, err)
	require.Equal(t, RecoveryReplayed, rec)
	require.False(t, GuardMarked(path))
	require.Equal(t, "new", observed(t, path))
}
