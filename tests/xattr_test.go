package tests

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pkg/xattr"
	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// TestChunkMapAgainstFileBytes: for every dataset of every version of every fixture, a
// Python checker reads each block of the published chunk map straight from the .h5 file,
// decodes it with its own zlib/shuffle/LZF code, trims edge chunks and compares with the
// mounted file; chunks without a key must be fill (tests/py/check_chunkmap.py).
func TestChunkMapAgainstFileBytes(t *testing.T) {
	py := python(t)
	manifests, err := fixture.All()
	require.NoError(t, err)
	files := []string{}
	for _, m := range manifests {
		files = append(files, m.H5)
	}
	files = append(files, makeVersioned(t, "--shape", "10,7", "--chunks", "4,3", "--versions", "4", "--lzf"))
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			mnt := mount(t, file)
			out, err := exec.Command(py, "py/check_chunkmap.py", mnt.Dir).CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Contains(t, string(out), "chunkmap ok:")
		})
	}
}

// TestXattrs reads metadata with github.com/pkg/xattr.
func TestXattrs(t *testing.T) {
	m := mount(t, "testdata/fixtures/basic_1d.h5")
	get := func(path, name string) string {
		v, err := xattr.Get(filepath.Join(m.Dir, path), name)
		require.NoError(t, err, "%s %s", path, name)
		return string(v)
	}
	require.Equal(t, "v4", get("", "user.vh5fs.current_version"))
	require.Equal(t, "4", get("", "user.vh5fs.data_version"))
	require.True(t, strings.HasSuffix(get("", "user.vh5fs.file"), "/basic_1d.h5"))

	require.Equal(t, "v2", get("versions/v3", "user.vh5fs.prev_version"))
	require.Equal(t, "__first_version__", get("versions/v1", "user.vh5fs.prev_version"))
	require.Equal(t, "2024-01-01 02:00:00.000000+0000", get("versions/v3", "user.vh5fs.timestamp"))

	require.Equal(t, "<i8", get("versions/v3/x", "user.vh5fs.dtype"))
	require.Equal(t, "[13]", get("versions/v3/x", "user.vh5fs.shape"))
	require.Equal(t, "[4]", get("versions/v3/x", "user.vh5fs.chunks"))
	require.Equal(t, "-1", get("versions/v3/x", "user.vh5fs.fillvalue"))
	require.Equal(t, "[]", get("versions/v3/x", "user.vh5fs.filters"))
	require.Equal(t, `"/_version_data/x/raw_data"`, get("versions/v3/x", "user.hdf5.raw_data"))

	var doc struct {
		DCPL struct {
			Layout struct {
				Class string  `json:"class"`
				Dims  []int64 `json:"dims"`
			} `json:"layout"`
		} `json:"dcpl"`
		ByteBlocks map[string]json.RawMessage `json:"byteBlocks"`
	}
	require.NoError(t, json.Unmarshal([]byte(get("versions/v3/x", "user.vh5fs.chunkmap")), &doc))
	require.Equal(t, "H5D_CHUNKED_REF", doc.DCPL.Layout.Class)
	require.Equal(t, []int64{4}, doc.DCPL.Layout.Dims)
	require.Contains(t, doc.ByteBlocks, "index_schema")
	require.Contains(t, doc.ByteBlocks, "0")
	require.NotContains(t, doc.ByteBlocks, "3", "the edge chunk is fill: no key")

	names, err := xattr.List(filepath.Join(m.Dir, "versions/v3/x"))
	require.NoError(t, err)
	require.Contains(t, names, "user.vh5fs.chunkmap.0")
	require.Contains(t, names, "user.hdf5.chunks")

	for _, name := range []string{"user.nope", "security.selinux", "system.posix_acl_access", "trusted.x"} {
		_, err := xattr.Get(filepath.Join(m.Dir, "versions/v3/x"), name)
		require.ErrorIs(t, err, syscall.ENODATA, name)
	}
	require.ErrorIs(t, xattr.Set(filepath.Join(m.Dir, "versions/v3/x"), "user.vh5fs.shape", []byte("[3]")), syscall.EROFS)
}

// TestGetfattr is the shell recipe: getfattr -d on a dataset file.
func TestGetfattr(t *testing.T) {
	m := mount(t, "testdata/fixtures/nested.h5")
	out := run(t, "getfattr", "-d", "--absolute-names", filepath.Join(m.Dir, "current/sensors/north/cube"))
	require.Contains(t, out, `user.vh5fs.dtype="|u1"`)
	require.Contains(t, out, `user.vh5fs.shape="[6,7,8]"`)
	require.Contains(t, out, "user.vh5fs.chunkmap=")
	out = run(t, "getfattr", "--only-values", "-n", "user.vh5fs.current_version", m.Dir)
	require.Equal(t, "dropped", out)
	groups := run(t, "getfattr", "-d", "--absolute-names", filepath.Join(m.Dir, "current/sensors"))
	require.Contains(t, groups, "user.hdf5.")
}

// TestChunkMap100k: the full map of a 100,000-chunk dataset is reachable through the
// paged xattrs, and every block holds its chunk (one float64 each, value = index); the
// dataset (its mapping list long enough to be mapped from the file) reads the same.
func TestChunkMap100k(t *testing.T) {
	if testing.Short() {
		t.Skip("generates a 100k-chunk file")
	}
	const n = 100000
	file := makeVersioned(t, "--shape", "100000", "--chunks", "1")
	m := mount(t, file)
	p := filepath.Join(m.Dir, "current", "data")
	main, err := xattr.Get(p, "user.vh5fs.chunkmap")
	require.NoError(t, err)
	require.Less(t, len(main), 64<<10)
	var doc struct {
		ByteBlocks struct {
			Pages     int    `json:"pages"`
			PageXattr string `json:"page_xattr"`
		} `json:"byteBlocks"`
	}
	require.NoError(t, json.Unmarshal(main, &doc))
	require.Greater(t, doc.ByteBlocks.Pages, 1)
	require.Equal(t, "user.vh5fs.chunkmap.{page}", doc.ByteBlocks.PageXattr)
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	seen := 0
	for i := 0; i < doc.ByteBlocks.Pages; i++ {
		page, err := xattr.Get(p, "user.vh5fs.chunkmap."+strconv.Itoa(i))
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 64<<10)
		var blocks map[string]struct{ Offset, Size int64 }
		require.NoError(t, json.Unmarshal(page, &blocks))
		for key, b := range blocks {
			k, err := strconv.Atoi(key)
			require.NoError(t, err)
			require.EqualValues(t, 8, b.Size)
			require.Equal(t, float64(k), math.Float64frombits(binary.LittleEndian.Uint64(raw[b.Offset:])), "block %s", key)
			seen++
		}
	}
	require.Equal(t, n, seen)
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Len(t, data, 8*n)
	for i := range n {
		if v := math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:])); v != float64(i) {
			t.Fatalf("element %d reads %v", i, v)
		}
	}
}
