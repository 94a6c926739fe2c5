package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	tagV2 = "release-1\tv2\t2024-01-01 01:00:00.000000+0000"
	tagV3 = "keep\tv3\t2024-01-01 02:00:00.000000+0000"
)

func namesFixture(name string) string { return fixturePath(filepath.Join("names", name)) }

// tagList is `vh5fs tag -l FILE`'s lines.
func tagList(t *testing.T, file string) []string {
	t.Helper()
	out, stderr, code := vh5fsRun(t, "tag", "-l", file)
	require.Equal(t, 0, code, stderr)
	return strings.Split(strings.TrimSpace(out), "\n")
}

// TestTagsKeptByLibrary: versioned-hdf5's own commit, delete_versions, modify_metadata and
// hash-table rebuild (the names/ fixtures) leave the tags vh5fs made in place; a tag whose
// version the library deleted (and made again under the same name) is dangling: listed and
// reported by fsck as such, and its link through a mount leads nowhere, never to the new v2.
func TestTagsKeptByLibrary(t *testing.T) {
	for _, tc := range []struct {
		file     string
		dangling bool
	}{
		{"names_before.h5", false}, {"names_commit.h5", false}, {"names_delete.h5", true},
		{"names_modify.h5", false}, {"names_rebuild.h5", false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			file := copyPath(t, namesFixture(tc.file))
			want := []string{tagV3, tagV2}
			if tc.dangling {
				want[1] += "  dangling: version v2 of 2024-01-01 01:00:00.000000+0000 is gone"
			}
			require.Equal(t, want, tagList(t, file))
			out, stderr, code := vh5fsRun(t, "fsck", file)
			require.Equal(t, 0, code, stderr)
			require.Equal(t, tc.dangling, strings.Contains(out, "dangling: tag release-1 names version v2"), out)
			out, stderr, code = vh5fsRun(t, "log", file, "--oneline")
			require.Equal(t, 0, code, stderr)
			require.Contains(t, out, "v3  2024-01-01 02:00:00.000000+0000  1 changed (tag: keep)\n", "log decorates tagged versions")
			require.Equal(t, !tc.dangling, strings.Contains(out, "(tag: release-1)"), out)
			// ls, info, diff and refs take a tag where they take a version.
			byTag, stderr, code := vh5fsRun(t, "ls", file, "release-1")
			if tc.dangling {
				require.Equal(t, 1, code)
				require.Contains(t, stderr, "tag release-1 is dangling: version v2 of 2024-01-01 01:00:00.000000+0000 is gone")
			} else {
				require.Equal(t, 0, code, stderr)
				byName, _, _ := vh5fsRun(t, "ls", file, "v2")
				require.Equal(t, byName, byTag)
				for _, args := range [][]string{{"info", file + ":release-1/x"}, {"diff", file, "release-1", "keep"}, {"refs", file, "release-1"}} {
					_, stderr, code := vh5fsRun(t, args...)
					require.Equal(t, 0, code, "%v: %s", args, stderr)
				}
			}
			m := mount(t, file, "ro")
			defer m.unmount(t)
			link, err := os.Readlink(filepath.Join(m.Dir, "tags", "release-1"))
			require.NoError(t, err)
			if tc.dangling {
				require.Equal(t, "(dangling) v2 of 2024-01-01 01:00:00.000000+0000", link)
				_, err := os.Stat(filepath.Join(m.Dir, "tags", "release-1", "x"))
				require.ErrorIs(t, err, os.ErrNotExist, "a dangling tag leads nowhere")
				_, err = os.Stat(filepath.Join(m.Dir, "versions", "v2", "x"))
				require.NoError(t, err, "although a version v2 exists again")
				return
			}
			require.Equal(t, "../versions/v2", link)
			viaTag, err := os.ReadFile(filepath.Join(m.Dir, "tags", "release-1", "x"))
			require.NoError(t, err)
			direct, err := os.ReadFile(filepath.Join(m.Dir, "versions", "v2", "x"))
			require.NoError(t, err)
			require.Equal(t, direct, viaTag)
		})
	}
}

// TestTagsThroughMount: on a read-write mount ln -s tags a version and rm untags it, both
// durable at return (another program reads them once the mount is gone); a taken name is
// EEXIST; rmdir of a tagged version is EBUSY and the version stays; a rename carries its
// tags. A read-only mount shows the tags and changes none.
func TestTagsThroughMount(t *testing.T) {
	file := copyPath(t, fixturePath("basic_1d.h5"))
	m := mount(t, file, "rw,allow_delete")
	tags := filepath.Join(m.Dir, "tags")
	ents, err := os.ReadDir(tags)
	require.NoError(t, err)
	require.Empty(t, ents)
	require.NoError(t, os.Symlink("versions/v2", filepath.Join(tags, "release-1")))
	require.NoError(t, os.Symlink("../versions/v3", filepath.Join(tags, "keep")))
	require.ErrorIs(t, os.Symlink("versions/v4", filepath.Join(tags, "release-1")), os.ErrExist)
	require.ErrorIs(t, os.Symlink("versions/nope", filepath.Join(tags, "x")), os.ErrNotExist)
	require.ErrorIs(t, os.Symlink("/etc", filepath.Join(tags, "y")), syscall.EINVAL)
	link, err := os.Readlink(filepath.Join(tags, "release-1"))
	require.NoError(t, err)
	require.Equal(t, "../versions/v2", link)

	require.ErrorIs(t, syscall.Rmdir(filepath.Join(m.Dir, "versions", "v2")), syscall.EBUSY)
	require.DirExists(t, filepath.Join(m.Dir, "versions", "v2"))
	require.Eventually(t, func() bool { return strings.Contains(m.stderr.String(), "held by a tag release-1") },
		5*time.Second, 10*time.Millisecond, "the refusal is logged, naming the tag")

	require.NoError(t, os.Rename(filepath.Join(m.Dir, "versions", "v2"), filepath.Join(m.Dir, "versions", "w2")))
	link, err = os.Readlink(filepath.Join(tags, "release-1"))
	require.NoError(t, err)
	require.Equal(t, "../versions/w2", link, "a renamed version keeps its tags")
	require.NoError(t, os.Remove(filepath.Join(tags, "release-1")))
	require.NoError(t, syscall.Rmdir(filepath.Join(m.Dir, "versions", "w2")), "untagged, it can go")
	m.unmount(t)

	require.Equal(t, []string{tagV3}, tagList(t, file))
	out, err := exec.Command(python(t), "-c", `import h5py,sys
print(h5py.File(sys.argv[1], "r")["_version_data/versions"].attrs["vh5fs_refs"])`, file).CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, `{"format":1,"tags":{"keep":{"version":"v3","timestamp":"2024-01-01 02:00:00.000000+0000"}}}`, strings.TrimSpace(string(out)))

	ro := mount(t, file, "ro")
	defer ro.unmount(t)
	ents, err = os.ReadDir(filepath.Join(ro.Dir, "tags"))
	require.NoError(t, err)
	require.Len(t, ents, 1)
	require.Equal(t, "keep", ents[0].Name())
	require.ErrorIs(t, os.Remove(filepath.Join(ro.Dir, "tags", "keep")), syscall.EROFS)
	require.ErrorIs(t, os.Symlink("versions/v1", filepath.Join(ro.Dir, "tags", "new")), syscall.EROFS)
}

// TestTagsRetention: a policy keeps tagged versions besides what it keeps, and says so:
// --keep-last 3 over 50 versions of which 2 older ones are tagged keeps 5. A deletion
// naming a tagged version is refused, naming the tag; compact and modify keep the tags.
func TestTagsRetention(t *testing.T) {
	file := copyPath(t, fixturePath("many_versions.h5"))
	_, stderr, code := vh5fsRun(t, "delete", file, "--keep-last", "50")
	require.Equal(t, 0, code, stderr)
	for tag, v := range map[string]string{"release-1": "v0260", "release-2": "v0270"} {
		out, stderr, code := vh5fsRun(t, "tag", file, tag, v)
		require.Equal(t, 0, code, stderr)
		require.Equal(t, fmt.Sprintf("%s: tagged %s %s\n", file, v, tag), out)
	}
	_, stderr, code = vh5fsRun(t, "tag", file, "release-1", "v0280")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "the name is taken by a tag or a branch")

	_, stderr, code = vh5fsRun(t, "delete", file, "v0260")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "version v0260: held by a tag release-1: delete the tag first")

	out, stderr, code := vh5fsRun(t, "delete", "-n", file, "--keep-last", "3")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, file+": would keep 2 versions the policy picked, held by tags or branches: v0260 (tag release-1) v0270 (tag release-2)")
	out, stderr, code = vh5fsRun(t, "delete", file, "--keep-last", "3")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "deleted 45 of 50 versions")
	out, stderr, code = vh5fsRun(t, "log", file, "--oneline")
	require.Equal(t, 0, code, stderr)
	var left []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		left = append(left, strings.Fields(l)[0])
	}
	slices.Sort(left)
	require.Equal(t, []string{"v0260", "v0270", "v0297", "v0298", "v0299"}, left)

	want := tagList(t, file)
	require.Len(t, want, 2)
	compacted := filepath.Join(t.TempDir(), "compacted.h5")
	_, stderr, code = vh5fsRun(t, "compact", file, "-o", compacted)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, want, tagList(t, compacted), "compact keeps the tags")
	_, stderr, code = vh5fsRun(t, "modify", file, "counts", "--chunks", "128")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, want, tagList(t, file), "modify keeps the tags")
}
