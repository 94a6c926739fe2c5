package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// Who may see what: a mount is private to the mounting user unless it has allow_other,
// and with allow_other the kernel checks every access against the modes vh5fs reports
// (default_permissions comes with allow_other). These tests mount as root and probe as
// uid/gid 65534 (nobody), which owns nothing in the mount.

const nobody = 65534

// sharedMount mounts file at a mount point that other users can reach (t.TempDir's
// parents are 0700), with the same start and teardown as mount.
func sharedMount(t *testing.T, file string, opts ...string) *mounted {
	t.Helper()
	base, err := os.MkdirTemp("/tmp", "vh5fs-perm")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(base, 0o755))
	mnt := filepath.Join(base, "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	t.Cleanup(func() { os.RemoveAll(base) }) // runs after the unmount registered below
	return startMount(t, mnt, vh5fsArgs(file, mnt, opts...))
}

// probeResult is one line of tests/py/probe_access.py's answer.
type probeResult struct {
	Op     string   `json:"op"`
	Path   string   `json:"path"`
	Result string   `json:"result"`
	Mode   uint32   `json:"mode"`
	UID    int      `json:"uid"`
	GID    int      `json:"gid"`
	Names  []string `json:"names"`
	Hex    string   `json:"hex"`
	Value  string   `json:"value"`
}

// probe runs the operations as uid (0: as root, else uid with gid uid and no
// supplementary groups) and returns one result per operation.
func probe(t *testing.T, uid uint32, ops ...[]string) []probeResult {
	t.Helper()
	in, err := json.Marshal(ops)
	require.NoError(t, err)
	script, err := filepath.Abs("py/probe_access.py")
	require.NoError(t, err)
	cmd := exec.Command(python(t), script)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	}
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "probe as %d: %s", uid, stderr.String())
	var res []probeResult
	require.NoError(t, json.Unmarshal(out, &res), "%s", out)
	require.Len(t, res, len(ops))
	return res
}

// permFile is a small versioned file: dataset "data", versions v0 and v1.
func permFile(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "vh5fs-perm-file")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := filepath.Join(dir, "perm.h5")
	run(t, python(t), "py/make_versioned.py", f, "--shape", "64", "--chunks", "16", "--versions", "2")
	return f
}

// superOptions returns the super options of the mount at dir from /proc/self/mountinfo.
func superOptions(t *testing.T, dir string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 4 && fields[4] == dir {
			for i, f := range fields {
				if f == "-" && i+3 < len(fields) {
					return strings.Split(fields[i+3], ",")
				}
			}
		}
	}
	t.Fatalf("%s not in mountinfo", dir)
	return nil
}

func TestPermPrivateWithoutAllowOther(t *testing.T) {
	file := permFile(t)
	for _, mode := range []string{"ro", "rw"} {
		t.Run(mode, func(t *testing.T) {
			m := sharedMount(t, file, mode)
			require.NotContains(t, superOptions(t, m.Dir), "allow_other")
			data := filepath.Join(m.Dir, "versions", "v1", "data")
			ops := [][]string{
				{"stat", m.Dir},
				{"list", m.Dir},
				{"stat", data},
				{"read", data},
				{"getxattr", data, "user.vh5fs.dtype"},
				{"write", data},
			}
			other := probe(t, nobody, ops...)
			for _, r := range other {
				require.Equal(t, "EACCES", r.Result, "%s %s as uid %d", r.Op, r.Path, nobody)
			}
			own := probe(t, 0, ops[:5]...)
			for _, r := range own {
				require.Equal(t, "ok", r.Result, "%s %s as root", r.Op, r.Path)
			}
			root := []string{"at", "branches", "current", "tags", "versions"}
			if mode == "rw" {
				root = []string{"at", "branches", "current", "stage", "tags", "versions"}
			}
			require.Equal(t, root, own[1].Names)
			require.Equal(t, 64*8*2, len(own[3].Hex))
			require.Equal(t, "<f8", own[4].Value)
		})
	}
}

func TestPermAllowOtherReadOnly(t *testing.T) {
	file := permFile(t)
	m := sharedMount(t, file, "ro,allow_other")
	super := superOptions(t, m.Dir)
	require.Contains(t, super, "allow_other")
	require.Contains(t, super, "default_permissions")

	versions := filepath.Join(m.Dir, "versions")
	data := filepath.Join(versions, "v1", "data")
	ops := [][]string{
		{"stat", m.Dir},
		{"list", m.Dir},
		{"stat", versions},
		{"list", versions},
		{"stat", filepath.Join(versions, "v1")},
		{"stat", data},
		{"read", data},
		{"read", filepath.Join(m.Dir, "current", "data")},
		{"getxattr", data, "user.vh5fs.shape"},
		{"getxattr", m.Dir, "user.vh5fs.current_version"},
	}
	other := probe(t, nobody, ops...)
	own := probe(t, 0, ops...)
	for i, r := range other {
		require.Equal(t, "ok", r.Result, "%s %s as uid %d", r.Op, r.Path, nobody)
		require.Equal(t, own[i], r, "uid %d sees what root sees", nobody)
	}
	// Modes and owner: the mounting user (root here), read-only everywhere.
	for _, i := range []int{0, 2, 4} {
		require.Equal(t, uint32(syscall.S_IFDIR|0o555), other[i].Mode, other[i].Path)
	}
	require.Equal(t, uint32(syscall.S_IFREG|0o444), other[5].Mode)
	for _, r := range []probeResult{other[0], other[5]} {
		require.Equal(t, os.Getuid(), r.UID)
		require.Equal(t, os.Getgid(), r.GID)
	}
	require.Equal(t, []string{"v0", "v1"}, other[3].Names)
	require.Equal(t, other[6].Hex, other[7].Hex, "current is v1")
	require.Equal(t, "[64]", other[8].Value)
	require.Equal(t, "v1", other[9].Value)

	// No one writes to a read-only mount; the other user is stopped by the read-only
	// mount (EROFS) or by the mode (EACCES), whichever the kernel checks first.
	denied := [][]string{
		{"write", data},
		{"truncate", data, "0"},
		{"setxattr", data, "user.vh5fs.shape", "[32]"},
		{"setxattr", m.Dir, "user.vh5fs.next_version", "x"},
	}
	for _, r := range probe(t, nobody, denied...) {
		require.Contains(t, []string{"EACCES", "EROFS"}, r.Result, "%s %s as uid %d", r.Op, r.Path, nobody)
	}
	for _, r := range probe(t, 0, denied...) {
		require.Contains(t, []string{"EROFS", "EACCES"}, r.Result, "%s %s as root", r.Op, r.Path)
	}
}

func TestPermAllowOtherReadWrite(t *testing.T) {
	file := permFile(t)
	m := sharedMount(t, file, "rw,allow_other,commit_name=by-root")
	require.Contains(t, superOptions(t, m.Dir), "default_permissions")

	versions := filepath.Join(m.Dir, "versions")
	data := filepath.Join(versions, "v1", "data")
	st := probe(t, nobody,
		[]string{"stat", m.Dir},
		[]string{"stat", versions},
		[]string{"stat", data},
		[]string{"read", data},
	)
	for _, r := range st {
		require.Equal(t, "ok", r.Result, "%s %s as uid %d", r.Op, r.Path, nobody)
		require.Equal(t, os.Getuid(), r.UID)
		require.Equal(t, os.Getgid(), r.GID)
	}
	require.Equal(t, uint32(syscall.S_IFDIR|0o755), st[0].Mode, "the root takes next_version")
	require.Equal(t, uint32(syscall.S_IFDIR|0o555), st[1].Mode)
	require.Equal(t, uint32(syscall.S_IFREG|0o644), st[2].Mode, "writable dataset file")

	// The other user reads but changes nothing: every write path is refused by the kernel.
	denied := probe(t, nobody,
		[]string{"write", data},
		[]string{"truncate", data, "0"},
		[]string{"setxattr", data, "user.vh5fs.shape", "[32]"},
		[]string{"setxattr", m.Dir, "user.vh5fs.next_version", "by-nobody"},
		[]string{"list", versions},
	)
	for _, r := range denied[:4] {
		require.Equal(t, "EACCES", r.Result, "%s %s as uid %d", r.Op, r.Path, nobody)
	}
	require.Equal(t, []string{"v0", "v1"}, denied[4].Names, "no version was made")

	// Root, the owner, writes: one element, fsync commits version "by-root".
	f, err := os.OpenFile(data, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}, 0) // 1.0 as <f8
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	target, err := os.Readlink(filepath.Join(m.Dir, "current"))
	require.NoError(t, err)
	require.Equal(t, "versions/by-root", target)

	// ... and the other user sees the new version, read-only to it as well.
	after := probe(t, nobody,
		[]string{"list", versions},
		[]string{"read", filepath.Join(versions, "by-root", "data")},
		[]string{"write", filepath.Join(versions, "by-root", "data")},
	)
	require.Equal(t, "ok", after[0].Result)
	require.Equal(t, []string{"by-root", "v0", "v1"}, after[0].Names)
	require.Equal(t, "ok", after[1].Result)
	require.True(t, strings.HasPrefix(after[1].Hex, "000000000000f03f"), after[1].Hex[:32])
	require.Equal(t, "EACCES", after[2].Result)
}
