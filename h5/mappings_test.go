package h5

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/vh5fs/vh5fs/h5meta"
)

// copyFixture copies fixture name into a temporary directory.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	in, err := os.Open(filepath.Join(fixtures, name))
	require.NoError(t, err)
	defer in.Close()
	path := filepath.Join(t.TempDir(), name)
	out, err := os.Create(path)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	return path
}

// openRW opens a copy of fixture basic_1d.h5 read-write, and its raw_data, until the test
// ends.
func openRW(t *testing.T) (string, *File, *Dataset) {
	t.Helper()
	path := copyFixture(t, "basic_1d.h5")
	f, err := OpenRW(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	src, err := f.OpenDataset("/_version_data/x/raw_data")
	require.NoError(t, err)
	t.Cleanup(func() { src.Close() })
	return path, f, src
}

// readAll reads the whole of the 1-D dataset d of 8-byte elements.
func readAll(t *testing.T, d *Dataset) []byte {
	t.Helper()
	rows := d.Info().Shape[0]
	b := make([]byte, 8*rows)
	require.NoError(t, d.ReadBox([]int64{0}, []int64{rows}, []int64{rows}, []int64{0}, b))
	return b
}

// TestCreateVirtualWritesList: a virtual dataset whose mapping list CreateVirtual wrote
// itself reads through libhdf5, in the same open and after reopening, as its blocks say,
// and later writers of the file (libhdf5 through h5py) leave it intact.
func TestCreateVirtualWritesList(t *testing.T) {
	path, f, src := openRW(t)
	srcData := readAll(t, src)
	rows := src.Info().Shape[0]

	// 300 one-element mappings, the last 50 elements unmapped (fill -1).
	const n, size = 300, 350
	var blocks []VirtualBlock
	want := make([]byte, 8*size)
	for i := range size {
		binary.LittleEndian.PutUint64(want[8*i:], ^uint64(0))
	}
	for i := range int64(n) {
		s := (i * 7) % rows
		blocks = append(blocks, VirtualBlock{VStart: []int64{i}, Count: []int64{1}, SrcStart: []int64{s}})
		copy(want[8*i:8*i+8], srcData[8*s:])
	}
	fill := want[8*n : 8*n+8]
	// Two, each made durable: libhdf5 writes the superblock when an allocation of its own
	// marked it changed, which the second creation need not do.
	for _, name := range []string{"/big", "/big2"} {
		require.NoError(t, f.CreateVirtual(name, src, []int64{size}, fill, blocks))
		require.Len(t, f.lists, 1, "CreateVirtual wrote the list itself")
		require.NoError(t, f.CheckMappingLists())
		require.NoError(t, f.FlushSync())
	}
	// A copy takes the list as stored.
	copies, err := f.CopiesMappingList("/big")
	require.NoError(t, err)
	require.True(t, copies)
	copied, err := f.CopyVirtual("/copy", "/big", src, []int64{size}, fill)
	require.NoError(t, err)
	require.True(t, copied)
	require.Len(t, f.lists, 1)
	require.NoError(t, f.CheckMappingLists())
	require.NoError(t, f.FlushSync())

	check := func(f *File) {
		t.Helper()
		for _, name := range []string{"/big", "/big2", "/copy"} {
			checkVirtual(t, f, name, blocks, src.Path(), want)
		}
	}
	check(f) // libhdf5 reads the headers from the file, as changed
	// What the machine stopping now would leave: libhdf5 writes the superblock again when
	// it closes the file.
	stopped := filepath.Join(t.TempDir(), "stopped.h5")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(stopped, b, 0o644))
	require.NoError(t, src.Close())
	require.NoError(t, f.Close())

	for _, p := range []string{stopped, path} {
		// Another program extends the file: it must allocate after the lists.
		out, err := exec.Command("/usr/bin/python3", "-c", `import h5py, numpy as np, sys
with h5py.File(sys.argv[1], "r+") as f:
    f.create_dataset("after", data=np.arange(100000.0))
    f.attrs["after"] = "x" * 1000`, p).CombinedOutput()
		require.NoError(t, err, "%s", out)
		f, err := Open(p)
		require.NoError(t, err)
		check(f)
		require.NoError(t, f.Close())
	}
}

// checkVirtual checks, through libhdf5, the mappings and the data of the virtual dataset
// at path.
func checkVirtual(t *testing.T, f *File, path string, blocks []VirtualBlock, src string, want []byte) {
	t.Helper()
	d, err := f.OpenDataset(path)
	require.NoError(t, err)
	defer d.Close()
	ms, err := d.Mappings()
	require.NoError(t, err)
	require.Len(t, ms, len(blocks))
	for i, m := range ms {
		b := blocks[i]
		require.Equal(t, Mapping{VStart: b.VStart, VCount: b.Count, SrcFile: ".", SrcDataset: src, SrcStart: b.SrcStart, SrcCount: b.Count}, m)
	}
	shape := d.Info().Shape
	requireVirtualMappings(t, f, path, ms, shape)
	got := make([]byte, len(want))
	require.NoError(t, d.ReadBox([]int64{0}, shape, shape, []int64{0}, got))
	require.Equal(t, want, got)
}

// TestCheckMappingLists: a dataset header that no longer refers to the list written for
// it (as if libhdf5 had written back the header it created) fails the check.
func TestCheckMappingLists(t *testing.T) {
	path, f, src := openRW(t)
	var blocks []VirtualBlock
	for i := range int64(100) {
		blocks = append(blocks, VirtualBlock{VStart: []int64{i}, Count: []int64{1}, SrcStart: []int64{0}})
	}
	require.NoError(t, f.CreateVirtual("/big", src, []int64{100}, nil, blocks))
	require.Len(t, f.lists, 1)
	addr := f.lists[0].ohdr

	disk, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer disk.Close()
	st, err := disk.Stat()
	require.NoError(t, err)
	meta, err := h5meta.Open(disk, st.Size())
	require.NoError(t, err)
	ref, err := meta.MappingListRef(addr)
	require.NoError(t, err)
	require.EqualValues(t, f.lists[0].heap, ref.Addr)
	undef := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}
	_, err = disk.WriteAt(undef, ref.At)
	require.NoError(t, err)

	err = f.CheckMappingLists()
	require.ErrorContains(t, err, "/big")
	require.ErrorContains(t, err, "not to object 1 of")
}

// TestCreateVirtualByLibhdf5: lists libhdf5 encodes otherwise (coordinates past 32 bits)
// or keeps in a shared collection (a few mappings) are created by libhdf5. CopyVirtual
// copies any list in a collection of its own, whatever its encoding.
func TestCreateVirtualByLibhdf5(t *testing.T) {
	_, f, src := openRW(t)
	for _, tc := range []struct {
		name   string
		shape  int64
		blocks []VirtualBlock
		copies bool
	}{
		{"few", 10, []VirtualBlock{{VStart: []int64{0}, Count: []int64{4}, SrcStart: []int64{0}}}, false},
		{"past 32 bits", 1<<32 + 200, func() (bs []VirtualBlock) {
			for i := range int64(100) {
				bs = append(bs, VirtualBlock{VStart: []int64{1<<32 + i}, Count: []int64{1}, SrcStart: []int64{0}})
			}
			return bs
		}(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, f.CreateVirtual("/"+tc.name, src, []int64{tc.shape}, nil, tc.blocks))
			require.Empty(t, f.lists)
			mappings := func(path string) []Mapping {
				d, err := f.OpenDataset(path)
				require.NoError(t, err)
				defer d.Close()
				ms, err := d.Mappings()
				require.NoError(t, err)
				return ms
			}
			ms := mappings("/" + tc.name)
			require.Len(t, ms, len(tc.blocks))
			require.Equal(t, tc.blocks[len(tc.blocks)-1].VStart, ms[len(ms)-1].VStart)

			copies, err := f.CopiesMappingList("/" + tc.name)
			require.NoError(t, err)
			require.Equal(t, tc.copies, copies)
			copied, err := f.CopyVirtual("/"+tc.name+"-copy", "/"+tc.name, src, []int64{tc.shape}, nil)
			require.NoError(t, err)
			require.Equal(t, tc.copies, copied)
			if !copied {
				k, err := f.Kind("/" + tc.name + "-copy")
				require.NoError(t, err)
				require.Equal(t, KindMissing, k, "nothing created: left to H5Ocopy")
				return
			}
			require.NoError(t, f.CheckMappingLists())
			require.Equal(t, ms, mappings("/"+tc.name+"-copy"))
		})
	}
}

// requireVirtualMappings requires File.VirtualMappings to read the dataset at path as
// libhdf5 reads it: mappings ms (copied: each call's slices are reused) and shape.
func requireVirtualMappings(t *testing.T, f *File, path string, ms []Mapping, shape []int64) {
	t.Helper()
	var got []Mapping
	gotShape, ok, err := f.VirtualMappings(path, func(m Mapping) error {
		got = append(got, Mapping{VStart: slices.Clone(m.VStart), VCount: slices.Clone(m.VCount), SrcFile: m.SrcFile,
			SrcDataset: m.SrcDataset, SrcStart: slices.Clone(m.SrcStart), SrcCount: slices.Clone(m.SrcCount)})
		return nil
	})
	require.NoError(t, err, path)
	require.True(t, ok, "%s: h5meta reads it", path)
	require.Equal(t, ms, got, path)
	require.Equal(t, shape, gotShape, path)
	onlyShape, ok, err := f.VirtualMappings(path, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, shape, onlyShape)
}

// TestVirtualMappings: versioned-hdf5's virtual datasets read through h5meta as libhdf5
// reads them, in a file open read-write (through the journal driver) and in one open
// read-only. A failing fn stops the scan with its error.
func TestVirtualMappings(t *testing.T) {
	for _, name := range []string{"golden_delete_several-before.h5", "nested.h5", "basic_1d.h5"} {
		t.Run(name, func(t *testing.T) {
			path := copyFixture(t, name)
			f, err := OpenRW(path)
			require.NoError(t, err)
			defer f.Close()
			vs, err := f.Members("/_version_data/versions")
			require.NoError(t, err)
			n := 0
			var walk func(dir string)
			walk = func(dir string) {
				ms, err := f.Members(dir)
				require.NoError(t, err)
				for _, m := range ms {
					p := dir + "/" + m.Name
					switch m.Kind {
					case KindGroup:
						walk(p)
					case KindDataset:
						d, err := f.OpenDataset(p)
						require.NoError(t, err)
						maps, err := d.Mappings()
						require.NoError(t, err)
						shape := d.Info().Shape
						d.Close()
						if len(maps) > 0 {
							requireVirtualMappings(t, f, p, maps, shape)
							n++
						}
					}
				}
			}
			for _, v := range vs {
				if v.Kind == KindGroup {
					walk("/_version_data/versions/" + v.Name)
				}
			}
			require.Positive(t, n, "the fixture has virtual datasets")
		})
	}
	// Open without the journal driver: read from the disk.
	ro, err := Open(filepath.Join(fixtures, "basic_1d.h5"))
	require.NoError(t, err)
	defer ro.Close()
	d, err := ro.OpenDataset("/_version_data/versions/v4/x")
	require.NoError(t, err)
	maps, err := d.Mappings()
	require.NoError(t, err)
	shape := d.Info().Shape
	d.Close()
	requireVirtualMappings(t, ro, "/_version_data/versions/v4/x", maps, shape)

	rw, err := OpenRW(copyFixture(t, "basic_1d.h5"))
	require.NoError(t, err)
	defer rw.Close()
	stop := errors.New("stop")
	calls := 0
	_, ok, err := rw.VirtualMappings("/_version_data/versions/v4/x", func(Mapping) error { calls++; return stop })
	require.ErrorIs(t, err, stop)
	require.True(t, ok)
	require.Equal(t, 1, calls)
}

// TestMappedListKeepsNoLock: a long mapping list read through h5meta is mapped from a
// file opened anew, so that once the HDF5 file is closed no lock of libhdf5's outlives it
// in the mapping (compact takes an exclusive lock on the file it replaces), whether the
// file was open through the journal driver or without it.
func TestMappedListKeepsNoLock(t *testing.T) {
	path, f, src := openRW(t)
	const n = 3000 // a list of a collection of its own, mapped
	var blocks []VirtualBlock
	for i := range int64(n) {
		blocks = append(blocks, VirtualBlock{VStart: []int64{i}, Count: []int64{1}, SrcStart: []int64{i % 5}})
	}
	require.NoError(t, f.CreateVirtual("/long", src, []int64{n}, make([]byte, 8), blocks))
	require.NoError(t, f.CheckMappingLists())
	require.NoError(t, f.FlushSync())
	require.NoError(t, src.Close())
	require.NoError(t, f.Close())

	for _, open := range []func(string) (*File, error){OpenRW, Open} {
		g, err := open(path)
		require.NoError(t, err)
		count := 0
		_, ok, err := g.VirtualMappings("/long", func(Mapping) error { count++; return nil })
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, n, count)
		require.NoError(t, g.Close())
		lf, err := os.Open(path)
		require.NoError(t, err)
		require.NoError(t, unix.Flock(int(lf.Fd()), unix.LOCK_EX|unix.LOCK_NB), "no lock outlives the close")
		lf.Close()
	}
}
