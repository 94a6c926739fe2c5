package tests

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLiveSeesDeleteAndRename: a file mounted with -o live (which holds no lock) has a
// version deleted by `vh5fs delete` and another renamed through a read-write mount of
// another process. After each, the live mount lists the versions the file holds, with
// their parents, and every kept version reads as before. A descriptor opened on a
// version before it was deleted reads its old bytes or fails (ESTALE, EIO), never other
// data; one on a kept version reads it still.
func TestLiveSeesDeleteAndRename(t *testing.T) {
	file := copyPath(t, fixturePath("golden_delete_middle-before.h5"))
	live := mount(t, file, "live")
	p := func(parts ...string) string {
		return filepath.Join(append([]string{live.Dir, "versions"}, parts...)...)
	}
	listed := func() []string {
		t.Helper()
		var names []string
		for _, e := range must(os.ReadDir(p())) {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		return names
	}
	require.Equal(t, []string{"v1", "v2", "v3", "v4"}, listed())
	want := map[string][]byte{}
	for _, v := range []string{"v1", "v2", "v3", "v4"} {
		want[v] = must(os.ReadFile(p(v, "x")))
	}
	require.NotEqual(t, want["v2"], want["v3"], "the fixture's versions differ")
	gone := must(os.Open(p("v2", "x")))
	defer gone.Close()
	kept := must(os.Open(p("v4", "x")))
	defer kept.Close()

	_, stderr, code := vh5fsRun(t, "delete", file, "v2")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, []string{"v1", "v3", "v4"}, listed())
	require.Equal(t, "v1", liveXattr(t, p("v3"), "user.vh5fs.prev_version"))
	for _, v := range []string{"v1", "v3", "v4"} {
		require.Equal(t, want[v], must(os.ReadFile(p(v, "x"))), v)
	}
	_, err := os.Stat(p("v2"))
	require.True(t, os.IsNotExist(err), "versions/v2 after its deletion: %v", err)
	require.Equal(t, want["v4"], readFD(t, kept), "a descriptor on a kept version")
	b, err := readAt(gone, len(want["v2"]))
	if err == nil {
		require.Equal(t, want["v2"], b, "a descriptor on the deleted version reads its old bytes or fails")
	} else {
		require.True(t, errors.Is(err, syscall.ESTALE) || errors.Is(err, syscall.EIO), "%v", err)
	}

	// Another process renames v3 through its read-write mount.
	rw := mount(t, file, "rw")
	require.NoError(t, os.Rename(filepath.Join(rw.Dir, "versions", "v3"), filepath.Join(rw.Dir, "versions", "r3")))
	rw.unmount(t)
	require.Equal(t, []string{"r3", "v1", "v4"}, listed())
	require.Equal(t, "r3", liveXattr(t, p("v4"), "user.vh5fs.prev_version"))
	require.Equal(t, "v1", liveXattr(t, p("r3"), "user.vh5fs.prev_version"))
	require.Equal(t, want["v3"], must(os.ReadFile(p("r3", "x"))))
	require.Equal(t, "versions/v4", must(os.Readlink(filepath.Join(live.Dir, "current"))))
	require.Equal(t, want["v4"], readFD(t, kept), "a descriptor on a kept version, after the rename")
}

// readAt reads up to n bytes of f from its start.
func readAt(f *os.File, n int) ([]byte, error) {
	b := make([]byte, n)
	got, err := f.ReadAt(b, 0)
	if err == io.EOF {
		err = nil
	}
	return b[:got], err
}

func readFD(t *testing.T, f *os.File) []byte {
	t.Helper()
	b, err := readAt(f, 1<<20)
	require.NoError(t, err)
	return b
}
