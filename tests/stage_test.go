package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/xattr"
	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/internal/conform"
	"github.com/vh5fs/vh5fs/internal/fixture"
)

// applyStageOps applies the golden's operations to the stage directory dir with ordinary
// system calls: pwrite, truncate, touch and setfattr, rm, mkdir.
func applyStageOps(t *testing.T, dir string, ops []fixture.StageOp) {
	t.Helper()
	for _, op := range ops {
		p := filepath.Join(dir, op.Path)
		switch op.Op {
		case "pwrite":
			b, err := op.Data()
			require.NoError(t, err)
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			require.NoError(t, err)
			_, err = f.WriteAt(b, op.Offset)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		case "truncate":
			require.NoError(t, os.Truncate(p, op.Size))
		case "create":
			require.NoError(t, exec.Command("touch", p).Run())
			require.NoError(t, exec.Command("setfattr", "-n", "user.vh5fs.create", "-v", string(op.Spec), p).Run())
		case "rm":
			require.NoError(t, os.Remove(p))
		case "mkdir":
			require.NoError(t, os.Mkdir(p, 0o755))
		case "setattr":
			require.NoError(t, xattr.Set(p, "user.hdf5."+op.Name, []byte(op.JSON)))
		default:
			t.Fatalf("unknown op %q", op.Op)
		}
	}
}

// stageOnGolden mounts a copy of the golden's before-file read-write (with opts) and makes
// stage name on it; it returns the edit, the file, the mount and the stage's directory.
func stageOnGolden(t *testing.T, name, opts string) (fixture.StageEdit, string, *mounted, string) {
	t.Helper()
	e, err := fixture.StageGolden()
	require.NoError(t, err)
	file := fixture.Copy(t, e.Before)
	m := mount(t, file, opts)
	dir := filepath.Join(m.Dir, "stage", name)
	require.NoError(t, os.Mkdir(dir, 0o755))
	return e, file, m, dir
}

// checkStageGolden compares version golden of file with versioned-hdf5's for the same
// change: the tree (data, dtypes, chunks, fill values, filters, attributes), each dataset's
// appended hash rows, slots and mappings, and h5py's reading of both.
func checkStageGolden(t *testing.T, file string, e fixture.StageEdit) {
	t.Helper()
	require.NoError(t, conform.StageGolden(file, e))
	checkFile(t, file)
	script := `
import sys, h5py, numpy as np
def describe(path, v):
    out = []
    with h5py.File(path, "r") as f:
        g = f["_version_data/versions"][v]
        out.append(("current", f["_version_data/versions"].attrs["current_version"] == v))
        def visit(name, obj):
            attrs = sorted((k, repr(obj.attrs[k])) for k in obj.attrs if k != "timestamp")
            if isinstance(obj, h5py.Dataset):
                out.append((name, str(obj.dtype), obj.shape, obj.fillvalue, obj[()].tobytes(), attrs))
            else:
                out.append((name, attrs))
        g.visititems(visit)
    return out
a, b = describe(sys.argv[1], "golden"), describe(sys.argv[2], sys.argv[3])
assert a == b, (a, b)
print(len(a))
`
	out, err := exec.Command(python(t), "-c", script, file, e.After, e.NewVersion).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// TestStageGolden: the golden multi-change applied as file operations in stage/golden and
// committed by mv into versions/ is the version versioned-hdf5 made of the same change.
func TestStageGolden(t *testing.T) {
	e, file, m, dir := stageOnGolden(t, "golden", "rw")
	base, err := xattr.Get(dir, "user.vh5fs.base")
	require.NoError(t, err)
	require.Equal(t, e.BaseVersion, string(base))
	applyStageOps(t, dir, e.Ops)

	// What the stage shows before it commits: the tree and a new dataset's bytes.
	require.Equal(t, []string{"old", "prices", "temp", "volume"}, readDirNames(t, dir))
	require.Empty(t, readDirNames(t, filepath.Join(dir, "old")))
	temp, err := os.ReadFile(filepath.Join(dir, "temp"))
	require.NoError(t, err)
	require.Len(t, temp, 30*8)
	unit, err := xattr.Get(filepath.Join(dir, "volume"), "user.hdf5.unit")
	require.NoError(t, err)
	require.Equal(t, `"shares"`, string(unit))
	for name, want := range map[string]string{
		"user.vh5fs.dtype":     "<f8",
		"user.vh5fs.shape":     "[30]",
		"user.vh5fs.chunks":    "[8]",
		"user.vh5fs.fillvalue": "0.0", // as the description gave it
		"user.vh5fs.create":    `{"dtype":"<f8","shape":[0],"chunks":[8],"fillvalue":0.0,"compression":"gzip","compression_opts":4,"shuffle":true}`,
	} {
		v, err := xattr.Get(filepath.Join(dir, "temp"), name)
		require.NoError(t, err, name)
		require.Equal(t, want, string(v), name)
	}
	_, err = os.Stat(filepath.Join(m.Dir, "versions", "golden"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing is published before the commit")

	out, err := exec.Command("mv", dir, filepath.Join(m.Dir, "versions")+"/").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "golden", currentVersion(t, m.Dir))
	require.Empty(t, readDirNames(t, filepath.Join(m.Dir, "stage")))
	got, err := os.ReadFile(filepath.Join(m.Dir, "versions", "golden", "temp"))
	require.NoError(t, err)
	require.Equal(t, temp, got)
	m.unmount(t)
	checkStageGolden(t, file, e)
}

// TestStageKept: a stage outlives its mount, in full (its data is saved at unmount), and
// `vh5fs ls --stages` lists it; the next mount shows it again and commits it.
func TestStageKept(t *testing.T) {
	e, file, m, dir := stageOnGolden(t, "golden", "rw,stage_mem=0")
	applyStageOps(t, dir, e.Ops)
	m.unmount(t)

	out, _, code := vh5fsRun(t, "ls", "--stages", file)
	require.Equal(t, 0, code)
	require.Regexp(t, `^golden +on r1 +2 datasets changed, 1 new datasets, 1 removed, 1 with attributes changed\n$`, out)

	m = mount(t, file, "rw")
	require.Equal(t, []string{"golden"}, readDirNames(t, filepath.Join(m.Dir, "stage")))
	require.NoError(t, os.Rename(filepath.Join(m.Dir, "stage", "golden"), filepath.Join(m.Dir, "versions", "golden")))
	m.unmount(t)
	out, _, code = vh5fsRun(t, "ls", "--stages", file)
	require.Equal(t, 0, code)
	require.Empty(t, out)
	checkStageGolden(t, file, e)
}

// TestStageSemantics: handles of a stage share one state; fsync and close do not commit;
// each refusal answers the errno that says what is true.
func TestStageSemantics(t *testing.T) {
	_, file, m, dir := stageOnGolden(t, "s", "rw")
	stages := filepath.Join(m.Dir, "stage")

	// Two handles, one state; a later open sees both writes.
	a, err := os.OpenFile(filepath.Join(dir, "volume"), os.O_RDWR, 0)
	require.NoError(t, err)
	b, err := os.OpenFile(filepath.Join(dir, "volume"), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = a.WriteAt(int64Bytes(7), 0)
	require.NoError(t, err)
	buf := make([]byte, 8)
	_, err = b.ReadAt(buf, 0)
	require.NoError(t, err)
	require.Equal(t, int64Bytes(7), buf)
	_, err = b.WriteAt(int64Bytes(8), 8)
	require.NoError(t, err)
	require.NoError(t, a.Sync())
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	got, err := os.ReadFile(filepath.Join(dir, "volume"))
	require.NoError(t, err)
	require.Equal(t, int64Bytes(7, 8), got[:16])
	require.Equal(t, "r1", currentVersion(t, m.Dir), "fsync and close in a stage do not commit")

	// A file written without a description is bytes: cp works.
	src := filepath.Join(t.TempDir(), "notes.bin")
	require.NoError(t, os.WriteFile(src, []byte("plain bytes"), 0o644))
	out, err := exec.Command("cp", src, dir+"/").CombinedOutput()
	require.NoError(t, err, "%s", out)
	dtype, err := xattr.Get(filepath.Join(dir, "notes.bin"), "user.vh5fs.dtype")
	require.NoError(t, err)
	require.Equal(t, "|u1", string(dtype))

	errnos := []struct {
		name string
		do   func() error
		want syscall.Errno
	}{
		{"mkdir of a taken stage name", func() error { return os.Mkdir(dir, 0o755) }, syscall.EEXIST},
		{"mkdir of a version's name", func() error { return os.Mkdir(filepath.Join(stages, "r1"), 0o755) }, syscall.EEXIST},
		{"commit to a taken version name", func() error { return os.Rename(dir, filepath.Join(m.Dir, "versions", "r1")) }, syscall.EEXIST},
		{"rename inside a stage", func() error { return os.Rename(filepath.Join(dir, "volume"), filepath.Join(dir, "v2")) }, syscall.EPERM},
		{"rename of a stage within stage/", func() error { return os.Rename(dir, filepath.Join(stages, "t")) }, syscall.EPERM},
		{"rmdir of a non-empty stage", func() error { return syscall.Rmdir(dir) }, syscall.ENOTEMPTY},
		{"rmdir of a non-empty group", func() error { return syscall.Rmdir(filepath.Join(dir, "old")) }, syscall.ENOTEMPTY},
		{"a bad description", func() error {
			return xattr.Set(filepath.Join(dir, "notes.bin"), "user.vh5fs.create", []byte(`{"dtype": "<f8"`))
		}, syscall.EINVAL},
		{"a description after a write", func() error {
			return xattr.Set(filepath.Join(dir, "notes.bin"), "user.vh5fs.create", []byte(`{"dtype": "<f8"}`))
		}, syscall.EINVAL},
		{"an attribute that is not JSON", func() error { return xattr.Set(filepath.Join(dir, "volume"), "user.hdf5.a", []byte(`{`)) }, syscall.EINVAL},
		{"removing a missing attribute", func() error { return xattr.Remove(filepath.Join(dir, "volume"), "user.hdf5.nope") }, syscall.ENODATA},
		{"chmod", func() error { return os.Chmod(filepath.Join(dir, "volume"), 0o600) }, syscall.EPERM},
		{"a symlink", func() error { return os.Symlink("volume", filepath.Join(dir, "link")) }, syscall.EPERM},
		{"truncate to part of a row", func() error { return os.Truncate(filepath.Join(dir, "prices"), 7) }, syscall.EINVAL},
		{"rebasing a changed stage", func() error { return xattr.Set(dir, "user.vh5fs.base", []byte("r1")) }, syscall.EBUSY},
	}
	for _, c := range errnos {
		t.Run(c.name, func(t *testing.T) {
			require.ErrorIs(t, c.do(), c.want)
		})
	}

	// Groups: mkdir, a dataset in it, rm -r.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "g", "h"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "g", "h", "x"), []byte{1, 2, 3}, 0o644))
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "g")))
	require.NotContains(t, readDirNames(t, dir), "g")

	// A new stage is rebased while unchanged.
	other := filepath.Join(stages, "other")
	require.NoError(t, os.Mkdir(other, 0o755))
	require.NoError(t, xattr.Set(other, "user.vh5fs.base", []byte("r1")))
	require.ErrorIs(t, xattr.Set(other, "user.vh5fs.base", []byte("nope")), syscall.ENOENT)

	// rm -r discards a stage; the other commits under its own name.
	require.NoError(t, os.RemoveAll(other))
	require.Equal(t, []string{"s"}, readDirNames(t, stages))
	open, err := os.OpenFile(filepath.Join(dir, "volume"), os.O_RDWR, 0)
	require.NoError(t, err)
	defer open.Close()
	require.NoError(t, os.Rename(dir, filepath.Join(m.Dir, "versions", "s")))
	require.Equal(t, "s", currentVersion(t, m.Dir))
	_, err = open.WriteAt(int64Bytes(9), 0)
	require.ErrorIs(t, err, syscall.ESTALE, "a write after the commit has no stage to go to")
	require.NoError(t, open.Close())
	got, err = os.ReadFile(filepath.Join(m.Dir, "versions", "s", "notes.bin"))
	require.NoError(t, err)
	require.Equal(t, "plain bytes", string(got))
	got, err = os.ReadFile(filepath.Join(m.Dir, "versions", "s", "volume"))
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(got, int64Bytes(7, 8)))
	m.unmount(t)
	log := m.stderr.String()
	for _, want := range []string{`msg="stage: refused: datasets and groups cannot be renamed`, `msg="stage: refused: modes and owners are fixed"`,
		`msg="stage: refused" op="setfattr user.vh5fs.create"`, `errno="file exists"`} {
		require.Contains(t, log, want, "refusals are logged")
	}
	checkFile(t, file)
	out, err = exec.Command(python(t), "-c", `
import sys, h5py
f = h5py.File(sys.argv[1], "r")
v = f["_version_data/versions/s"]
print(v.attrs["prev_version"], bytes(v["notes.bin"][()]).decode(), v["volume"][:2].tolist(), sorted(v))`, file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "r1 plain bytes [7, 8] ['notes.bin', 'old', 'prices', 'volume']", strings.TrimSpace(string(out)))
}

// TestStageCrash: a daemon killed with SIGKILL keeps, in its stage, every change to the
// tree that returned and each dataset's data as of its last fsync; writes after that are
// lost, as documented.
func TestStageCrash(t *testing.T) {
	_, file, m, dir := stageOnGolden(t, "c", "rw")
	require.NoError(t, os.Remove(filepath.Join(dir, "old", "x")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "grp"), 0o755))
	f, err := os.OpenFile(filepath.Join(dir, "volume"), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(int64Bytes(11, 12), 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	_, err = f.WriteAt(int64Bytes(13), 8) // not synced: lost with the daemon
	require.NoError(t, err)
	require.NoError(t, m.cmd.Process.Kill())
	require.Error(t, m.wait(t))
	f.Close()
	exec.Command("fusermount3", "-uz", m.Dir).Run()

	// Checked before anything mounts the file again: what the stage's files hold.
	out, _, code := vh5fsRun(t, "ls", "--stages", file)
	require.Equal(t, 0, code)
	require.Regexp(t, `^c +on r1 +1 datasets changed, 1 removed, 1 new groups\n$`, out)

	m = mount(t, file, "rw")
	dir = filepath.Join(m.Dir, "stage", "c")
	require.Equal(t, []string{"grp", "old", "prices", "volume"}, readDirNames(t, dir))
	require.Empty(t, readDirNames(t, filepath.Join(dir, "old")))
	got, err := os.ReadFile(filepath.Join(dir, "volume"))
	require.NoError(t, err)
	require.Equal(t, int64Bytes(11, 12), got[:16], "the synced data, not the write after it")
	require.NoError(t, os.Rename(dir, filepath.Join(m.Dir, "versions", "c")))
	got, err = os.ReadFile(filepath.Join(m.Dir, "versions", "c", "volume"))
	require.NoError(t, err)
	require.Equal(t, int64Bytes(11, 12), got[:16], "%s", m.stderr)
	m.unmount(t)
	checkFile(t, file)
}

// TestStageCommitKilled: the daemon killed with SIGKILL at moments spread over a stage's
// commit (mv into versions/). Checked before anything mounts the file again: which versions
// h5py reads as committed (it must read the file unless a journal is beside it: a kill in
// the apply leaves the file half-written until the next mount, as the README says), and
// whether `vh5fs ls --stages` shows the commit under way. The next mount keeps every version
// h5py saw, and one whose apply h5py saw begun; it serves the stage again exactly when the
// version is not in the file (and the stage then commits), and has removed it otherwise;
// either way the version is versioned-hdf5's (the stage's datasets are synced first: a
// crash loses a stage's writes since their last fsync, as documented).
func TestStageCommitKilled(t *testing.T) {
	const committed = `import sys, h5py
vs = h5py.File(sys.argv[1], "r", locking=False)["_version_data/versions"]
print(" ".join(sorted(k for k in vs if k != "__first_version__" and bool(vs[k].attrs["committed"]))))`
	outcomes := map[string]int{}
	for i := range 16 {
		e, file, m, dir := stageOnGolden(t, "golden", "rw")
		applyStageOps(t, dir, e.Ops)
		for _, ds := range []string{"prices", "temp", "volume"} { // saved, as the crash rule asks
			f, err := os.Open(filepath.Join(dir, ds))
			require.NoError(t, err)
			require.NoError(t, f.Sync())
			require.NoError(t, f.Close())
		}
		mv := exec.Command("mv", dir, filepath.Join(m.Dir, "versions")+"/")
		require.NoError(t, mv.Start())
		time.Sleep(time.Duration(i) * 750 * time.Microsecond) // 0-11 ms: before, during and after the commit here
		require.NoError(t, m.cmd.Process.Kill())
		require.Error(t, m.wait(t))
		exec.Command("fusermount3", "-uz", m.Dir).Run()
		mv.Wait() // its answer is lost with the daemon, or came before it died

		// Killed in the apply, after the commit point: the journal is complete and the file
		// half-written until the next mount rolls it forward, as the README warns other
		// programs. Without a journal the file must be whole to them.
		_, err := os.Stat(file + h5.JournalSuffix)
		journal := err == nil
		out, readErr := exec.Command(python(t), "-c", committed, file).CombinedOutput()
		if !journal {
			require.NoError(t, readErr, "no journal: h5py reads the file (kill %d)\n%s", i, out)
		}
		sawGolden := readErr == nil && slices.Contains(strings.Fields(string(out)), "golden")
		ls, _, _ := vh5fsRun(t, "ls", "--stages", file)
		underWay := strings.Contains(ls, "its commit as golden was under way")

		m = mount(t, file, "rw")
		_, err = os.Stat(filepath.Join(m.Dir, "versions", "golden"))
		has := err == nil
		_, err = os.Stat(filepath.Join(m.Dir, "stage", "golden"))
		kept := err == nil
		require.NotEqual(t, has, kept, "the stage is served exactly when its version is not in the file (kill %d)\n%s", i, m.stderr)
		if sawGolden || readErr != nil { // a half-written file: the apply had begun
			require.True(t, has, "a version h5py read as committed, or whose apply it saw begun, survives (kill %d)", i)
		}
		switch {
		case readErr != nil:
			outcomes["in the apply, the file half-written until the next mount"]++
		case kept:
			outcomes["before its commit point"]++
			out, err := exec.Command("mv", filepath.Join(m.Dir, "stage", "golden"), filepath.Join(m.Dir, "versions")+"/").CombinedOutput()
			require.NoError(t, err, "%s", out)
		case underWay:
			outcomes["past its commit point, the stage removed by the next mount"]++
			require.Contains(t, m.stderr.String(), "stage was committed before the last mount ended")
		default:
			outcomes["done"]++
		}
		m.unmount(t)
		checkStageGolden(t, file, e)
	}
	t.Logf("kills: %v", outcomes)
}

// TestStageAttributesAndShape: attributes on a stage's root and groups become the version's
// and its groups'; user.vh5fs.shape resizes a dataset in the stage without a commit; mknod
// makes a dataset; stage/ itself takes no files, links or mode changes.
func TestStageAttributesAndShape(t *testing.T) {
	_, file, m, dir := stageOnGolden(t, "a", "rw")
	stages := filepath.Join(m.Dir, "stage")
	require.NoError(t, xattr.Set(dir, "user.hdf5.author", []byte(`"ci"`)))
	require.NoError(t, xattr.Set(filepath.Join(dir, "old"), "user.hdf5.level", []byte(`3`)))
	require.ErrorIs(t, xattr.Set(dir, "user.hdf5.timestamp", []byte(`"x"`)), syscall.EINVAL, "versioned-hdf5's own")
	require.NoError(t, xattr.Set(filepath.Join(dir, "prices"), "user.vh5fs.shape", []byte("[32,4]")))
	st, err := os.Stat(filepath.Join(dir, "prices"))
	require.NoError(t, err)
	require.Equal(t, int64(32*4*8), st.Size())
	require.Equal(t, "r1", currentVersion(t, m.Dir), "a stage's resize commits nothing")
	require.NoError(t, syscall.Mknod(filepath.Join(dir, "made"), syscall.S_IFREG|0o644, 0))
	require.ErrorIs(t, syscall.Mknod(filepath.Join(dir, "fifo"), syscall.S_IFIFO|0o644, 0), syscall.EPERM)
	for name, err := range map[string]error{
		"chmod stage/":      os.Chmod(stages, 0o700),
		"symlink in stage/": os.Symlink("a", filepath.Join(stages, "link")),
	} {
		require.ErrorIs(t, err, syscall.EPERM, name)
	}
	require.ErrorIs(t, os.WriteFile(filepath.Join(stages, "file"), nil, 0o644), syscall.EROFS)
	require.NoError(t, os.Rename(dir, filepath.Join(m.Dir, "versions", "a")))
	m.unmount(t)
	checkFile(t, file)
	out, err := exec.Command(python(t), "-c", `
import sys, h5py
v = h5py.File(sys.argv[1], "r")["_version_data/versions/a"]
print(v.attrs["author"], v.attrs["prev_version"], v["old"].attrs["level"], v["prices"].shape, sorted(v))`, file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "ci r1 3 (32, 4) ['made', 'old', 'prices', 'volume']", strings.TrimSpace(string(out)))
}

// TestStageGoldenEdits: each golden edit's byte_ops applied in a stage and committed by mv
// into versions/ yields the version versioned-hdf5 committed, as a handle's fsync does
// (TestGoldenThroughMount): same data, appended hash rows and slots, and mappings; so does
// the stage kept on disk over a remount between its writes and its commit.
func TestStageGoldenEdits(t *testing.T) {
	edits, err := fixture.Edits()
	require.NoError(t, err)
	for _, e := range edits {
		for _, kept := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/kept=%v", e.Name, kept), func(t *testing.T) { stageGoldenEdit(t, e, kept) })
		}
	}
}

// stageGoldenEdit applies golden edit e in a stage on its base, remounting before the
// commit if kept, and compares the version committed with versioned-hdf5's.
func stageGoldenEdit(t *testing.T, e fixture.Edit, kept bool) {
	file := fixture.Copy(t, e.Before)
	from, err := conform.Largest(file, e.BaseVersion, e.Dataset)
	require.NoError(t, err)
	m := mount(t, file, "rw")
	dir := filepath.Join(m.Dir, "stage", "golden")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, xattr.Set(dir, "user.vh5fs.base", []byte(e.BaseVersion)))
	f, err := os.OpenFile(filepath.Join(dir, e.Dataset), os.O_RDWR, 0)
	require.NoError(t, err)
	applyByteOps(t, f, e.ByteOps)
	require.NoError(t, f.Close())
	if kept {
		m.unmount(t)
		m = mount(t, file, "rw")
		dir = filepath.Join(m.Dir, "stage", "golden")
	}
	require.NoError(t, os.Rename(dir, filepath.Join(m.Dir, "versions", "golden")))
	require.Equal(t, "golden", currentVersion(t, m.Dir))
	m.unmount(t)

	got, err := conform.Read(file, "golden", e.Dataset, from)
	require.NoError(t, err)
	want, err := conform.Read(e.After, e.NewVersion, e.Dataset, from)
	require.NoError(t, err)
	require.Empty(t, conform.Diff(got, want))
	checkFile(t, file)
}

// applyByteOps makes a golden edit's byte operations on f, an open dataset file.
func applyByteOps(t *testing.T, f *os.File, ops []fixture.ByteOp) {
	t.Helper()
	for _, op := range ops {
		switch op.Op {
		case "pwrite":
			b, err := op.Data()
			require.NoError(t, err)
			_, err = f.WriteAt(b, op.Offset)
			require.NoError(t, err)
		case "truncate":
			require.NoError(t, f.Truncate(op.Size))
		}
	}
}
