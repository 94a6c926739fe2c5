package h5

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

const fixtures = "../tests/testdata/fixtures"

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "text.h5")
	require.NoError(t, os.WriteFile(text, []byte("not hdf5\n"), 0o644))
	for _, tc := range []struct {
		name, path string
		want       error
	}{
		{"missing", filepath.Join(dir, "nope.h5"), os.ErrNotExist},
		{"text", text, ErrNotHDF5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(tc.path)
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func TestBasic(t *testing.T) {
	f, err := Open(filepath.Join(fixtures, "basic_1d.h5"))
	require.NoError(t, err)
	defer f.Close()

	m, err := f.Members("/_version_data/versions")
	require.NoError(t, err)
	require.Equal(t, []Member{{"__first_version__", KindGroup}, {"v1", KindGroup}, {"v2", KindGroup}, {"v3", KindGroup}, {"v4", KindGroup}}, m)

	k, err := f.Kind("/_version_data/versions/nope/x")
	require.NoError(t, err)
	require.Equal(t, KindMissing, k)

	a, ok, err := f.Attr("/_version_data/versions", "current_version")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "v4", a.Value)
	a, _, err = f.Attr("/_version_data/versions", "data_version")
	require.NoError(t, err)
	require.Equal(t, int64(4), a.Value)
	a, _, err = f.Attr("/_version_data/versions/v2", "committed")
	require.NoError(t, err)
	require.Equal(t, true, a.Value)
	_, ok, err = f.Attr("/_version_data/versions", "nope")
	require.NoError(t, err)
	require.False(t, ok)

	d, err := f.OpenDataset("/_version_data/versions/v3/x")
	require.NoError(t, err)
	defer d.Close()
	info := d.Info()
	require.Equal(t, "<i8", info.Type.DType)
	require.Equal(t, []int64{13}, info.Shape)
	require.Equal(t, Virtual, info.Layout)
	maps, err := d.Mappings()
	require.NoError(t, err)
	require.Len(t, maps, 3) // the edge chunk [12, 13) holds the fill value: unmapped
	require.Equal(t, Mapping{VStart: []int64{4}, VCount: []int64{4}, SrcFile: ".", SrcDataset: "/_version_data/x/raw_data", SrcStart: []int64{12}, SrcCount: []int64{4}}, maps[1])

	raw, err := f.OpenDataset("/_version_data/x/raw_data")
	require.NoError(t, err)
	defer raw.Close()
	require.Equal(t, []int64{4}, raw.Info().Chunks)
	buf := make([]byte, 8*4)
	require.NoError(t, raw.ReadBox([]int64{0}, []int64{4}, []int64{4}, []int64{0}, buf))

	// The hash table is LZF-compressed: reading it exercises the filter.
	ht, err := f.OpenDataset("/_version_data/x/hash_table")
	require.NoError(t, err)
	defer ht.Close()
	require.Equal(t, 32000, ht.Info().Filters[0].ID)
	rows := make([]byte, 48*6)
	require.NoError(t, ht.ReadBox([]int64{0}, []int64{6}, []int64{6}, []int64{0}, rows))
	require.NotEqual(t, make([]byte, 32), rows[:32])

	// A failing call carries HDF5's own message.
	_, err = f.OpenDataset("/nope")
	var he *Error
	require.True(t, errors.As(err, &he))
	require.Contains(t, he.Error(), "H5Dopen2")
}

func TestChunkInfo(t *testing.T) {
	f, err := Open(filepath.Join(fixtures, "basic_1d.h5"))
	require.NoError(t, err)
	defer f.Close()
	raw, err := f.OpenDataset("/_version_data/x/raw_data")
	require.NoError(t, err)
	defer raw.Close()
	n := raw.Info().Shape[0] / 4
	var coords [][]int64
	for k := int64(0); k < n; k++ {
		coords = append(coords, []int64{4 * k})
	}
	infos, err := raw.ChunkInfo(coords)
	require.NoError(t, err)
	require.Len(t, infos, int(n))
	file, err := os.ReadFile(filepath.Join(fixtures, "basic_1d.h5"))
	require.NoError(t, err)
	for k, ci := range infos {
		require.EqualValues(t, 32, ci.Size, "uncompressed chunk of 4 int64")
		buf := make([]byte, 32)
		require.NoError(t, raw.ReadBox([]int64{4 * int64(k)}, []int64{4}, []int64{4}, []int64{0}, buf))
		require.Equal(t, buf, file[ci.Offset:ci.Offset+ci.Size], "slot %d read at its offset", k)
	}
	_, err = raw.ChunkInfo([][]int64{{1, 2}})
	require.Error(t, err)
}

func TestOpenTruncated(t *testing.T) {
	whole, err := os.ReadFile(filepath.Join(fixtures, "basic_1d.h5"))
	require.NoError(t, err)
	dir := t.TempDir()
	for _, tc := range []struct {
		size int
		want string
	}{
		{40, "truncated inside the superblock (40 bytes)"},
		{15400, "truncated: 15400 bytes, the superblock records 26969"},
	} {
		path := filepath.Join(dir, "cut.h5")
		require.NoError(t, os.WriteFile(path, whole[:tc.size], 0o644))
		_, err := Open(path)
		require.ErrorIs(t, err, ErrTruncated)
		var he *Error
		require.ErrorAs(t, err, &he, "the HDF5 error stays reachable")
		require.Equal(t, path+": "+tc.want, err.Error())
	}
}

// TestErrorsNotPrinted: HDF5's automatic error printing is per thread; no thread the HDF5
// lock runs on prints error stacks to stderr.
func TestErrorsNotPrinted(t *testing.T) {
	f, err := Open(filepath.Join(fixtures, "basic_1d.h5"))
	require.NoError(t, err)
	defer f.Close()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	saved, err := syscall.Dup(2)
	require.NoError(t, err)
	require.NoError(t, syscall.Dup2(int(w.Fd()), 2))
	for i := 0; i < 8; i++ {
		done := make(chan error)
		go func() {
			// Exiting while locked ends the thread: each failure runs on a new one.
			runtime.LockOSThread()
			_, err := f.OpenDataset("/no/such/dataset")
			done <- err
		}()
		require.Error(t, <-done)
	}
	require.NoError(t, syscall.Dup2(saved, 2))
	syscall.Close(saved)
	w.Close()
	printed, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NotContains(t, string(printed), "HDF5-DIAG")
}

// TestMembersBroken: a hard link whose object header cannot be read is reported as broken,
// not left out (or taken for a soft link).
func TestMembersBroken(t *testing.T) {
	whole, err := os.ReadFile(filepath.Join(fixtures, "basic_1d.h5"))
	require.NoError(t, err)
	const v2x = 19392 // object header of /_version_data/versions/v2/x (h5py's h5o.get_info)
	require.Equal(t, byte(1), whole[v2x], "a version 1 object header")
	whole[v2x] = 0x7f
	path := filepath.Join(t.TempDir(), "broken.h5")
	require.NoError(t, os.WriteFile(path, whole, 0o644))
	f, err := Open(path)
	require.NoError(t, err)
	defer f.Close()
	m, err := f.Members("/_version_data/versions/v2")
	require.NoError(t, err)
	require.Equal(t, []Member{{"x", KindBroken}}, m)
	m, err = f.Members("/_version_data/versions/v1")
	require.NoError(t, err)
	require.Equal(t, []Member{{"x", KindDataset}}, m)
}
