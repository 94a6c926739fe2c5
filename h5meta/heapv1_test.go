package h5meta

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// heapv1Out is where TestWriteHeapV1Fixtures writes its files (none: a temporary
// directory, checked and thrown away). To regenerate the committed fixtures:
//
//	go test ./h5meta -run TestWriteHeapV1Fixtures -heapv1-out ../tests/testdata/latest
var heapv1Out = flag.String("heapv1-out", "", "directory to write the heapv1-* fixtures to (TestWriteHeapV1Fixtures)")

// heapV1Sources are the fixtures re-encoded with version 1 mapping lists, under
// tests/testdata/fixtures; each becomes heapv1-NAME.h5 beside a copy of its manifest.
var heapV1Sources = []string{"basic_1d", "grid_2d_gzip"}

// TestWriteHeapV1Fixtures builds tests/testdata/latest/heapv1-*.h5: a fixture in which
// every virtual dataset's mapping list is re-encoded as HDF5 2.x writes it with its lower
// version bound at 2.0 (global heap block version 1: the same-file flag in place of ".",
// the dataset name stored by the first mapping and referred to by index by the others;
// each selection a regular hyperslab of version 3, as 1.12 and later write them). Each
// list goes into a global heap collection of its own appended at the end of the file,
// the layout message's heap ID is pointed at it and the superblock's end-of-file address
// moved past it; the old lists stay where they were, unreferenced. The virtual datasets
// are found by walking the groups from the root, without libhdf5. It checks that every
// patched list decodes to the original's mappings, and that the committed files (when
// present) are what it builds; with -heapv1-out it writes them.
func TestWriteHeapV1Fixtures(t *testing.T) {
	out := *heapv1Out
	if out == "" {
		out = t.TempDir()
	}
	for _, name := range heapV1Sources {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join("../tests/testdata/fixtures", name+".h5")
			whole, err := os.ReadFile(src)
			require.NoError(t, err)
			patched, n := heapV1Patch(t, whole)
			require.NotZero(t, n, "%s has no virtual dataset", src)

			// Every virtual dataset of the patched file has a version 1 list with the
			// original's mappings.
			orig, err := Open(bytes.NewReader(whole), int64(len(whole)))
			require.NoError(t, err)
			f, err := Open(bytes.NewReader(patched), int64(len(patched)))
			require.NoError(t, err)
			vds, err := virtualDatasets(f)
			require.NoError(t, err)
			require.Len(t, vds, n)
			for _, v := range vds {
				want, err := orig.VirtualMappings(v.Addr)
				require.NoError(t, err, v.Name)
				got, err := f.VirtualMappings(v.Addr)
				require.NoError(t, err, v.Name)
				require.Equal(t, want, got, v.Name)
				l, err := f.Mappings(v.Addr)
				require.NoError(t, err, v.Name)
				require.Equal(t, byte(1), l.vers, "%s: mapping list encoding version", v.Name)
				t.Logf("%s (object header %d): %d mappings, list of %d bytes", v.Name, v.Addr, len(got), l.Size())
			}

			base := "heapv1-" + name
			manifest := heapV1Manifest(t, filepath.Join("../tests/testdata/fixtures", name+".json"), base+".h5")
			committed := filepath.Join("../tests/testdata/latest", base)
			if *heapv1Out == "" {
				// The committed files are what this builds.
				if b, err := os.ReadFile(committed + ".h5"); err == nil {
					require.True(t, bytes.Equal(patched, b), "%s.h5 differs from what the generator builds: regenerate with -heapv1-out", committed)
				}
				if b, err := os.ReadFile(committed + ".json"); err == nil {
					require.Equal(t, string(manifest), string(b), "%s.json", committed)
				}
			}
			require.NoError(t, os.WriteFile(filepath.Join(out, base+".h5"), patched, 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(out, base+".json"), manifest, 0o644))
			t.Logf("%s: %d virtual datasets, %d -> %d bytes", base, n, len(whole), len(patched))
		})
	}
}

// heapV1Patch returns the file whole with every virtual dataset's mapping list replaced by
// its version 1 encoding, and how many it replaced.
func heapV1Patch(t *testing.T, whole []byte) ([]byte, int) {
	f, err := Open(bytes.NewReader(whole), int64(len(whole)))
	require.NoError(t, err)
	eoaAt, err := f.EOAField() // a checksummed superblock (version 2, 3) is refused here
	require.NoError(t, err)
	so := f.SizeOfOffsets()
	eoa := readUint(whole[eoaAt:], so)
	require.LessOrEqual(t, eoa, uint64(len(whole))-uint64(f.Base()), "allocated space ends beyond the file")
	vds, err := virtualDatasets(f)
	require.NoError(t, err)
	patched := bytes.Clone(whole)
	for _, v := range vds {
		ms, err := f.VirtualMappings(v.Addr)
		require.NoError(t, err, v.Name)
		list := encodeAsV2x(f.SizeOfLengths(), ms)
		ref, err := f.MappingListRef(v.Addr) // a checksummed object header is refused here
		require.NoError(t, err, v.Name)
		at := uint64(len(patched)) - uint64(f.Base())
		patched = append(patched, f.HeapCollection(list)...)
		putUint(patched[ref.At:], so, at)
		putUint(patched[ref.At+int64(so):], 4, 1) // the collection's object 1
	}
	putUint(patched[eoaAt:], so, uint64(len(patched))-uint64(f.Base()))
	return patched, len(vds)
}

// encodeAsV2x encodes mappings as a version 1 list, as libhdf5 2.x stores one with its
// lower bound at 2.0 (format specification 4.0; see encodeV1): a source file "." is the
// same-file flag with no name; any other name is stored by the first mapping that has it
// and referred to by that mapping's index in the later ones; each selection is a regular
// hyperslab of version 3 with fields of the smallest size that holds its start, stride,
// count and block.
func encodeAsV2x(sl int, ms []Mapping) []byte {
	files, dsets := map[string]int{}, map[string]int{}
	var ents []v1Entry
	for i, m := range ms {
		e := v1Entry{src: hyperV2x(m.SrcStart, m.SrcCount), virt: hyperV2x(m.VStart, m.VCount)}
		switch k, seen := files[m.SrcFile]; {
		case m.SrcFile == ".":
			e.flags |= sameFile
		case seen:
			e.flags, e.file = e.flags|fileShared, k
		default:
			e.file = m.SrcFile
			files[m.SrcFile] = i
		}
		if k, seen := dsets[m.SrcDataset]; seen {
			e.flags, e.dset = e.flags|dsetShared, k
		} else {
			e.dset = m.SrcDataset
			dsets[m.SrcDataset] = i
		}
		ents = append(ents, e)
	}
	return encodeV1(1, sl, ents)
}

// hyperV2x is hyper3 with the field size libhdf5 1.12 and later choose for a regular
// hyperslab: 2 bytes when every field is at most 65535, 4 when at most 2^32-1, else 8.
func hyperV2x(start, count []int64) []byte {
	top := int64(1) // stride and count
	for k := range start {
		top = max(top, start[k], count[k])
	}
	enc := 8
	switch {
	case top <= math.MaxUint16:
		enc = 2
	case top <= math.MaxUint32:
		enc = 4
	}
	return hyper3(enc, start, count)
}

// heapV1Manifest is the manifest at path with its "file" field set to file, its bytes
// otherwise as they are: everything else must parse the same.
func heapV1Manifest(t *testing.T, path, file string) []byte {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	old, ok := m["file"].(string)
	require.True(t, ok, "%s: no \"file\"", path)
	field := func(v string) []byte {
		s, err := json.Marshal(v)
		require.NoError(t, err)
		return append([]byte(`"file": `), s...)
	}
	require.Equal(t, 1, bytes.Count(b, field(old)), "%s: the \"file\" field as written", path)
	out := bytes.Replace(b, field(old), field(file), 1)
	var got map[string]any
	require.NoError(t, json.Unmarshal(out, &got))
	require.Equal(t, file, got["file"])
	m["file"] = file
	require.Equal(t, m, got)
	return out
}

// vdsLink is a virtual dataset found under the root group: its path and object header.
type vdsLink struct {
	Name string
	Addr uint64
}

// virtualDatasets walks the groups from the root (Links) and returns every virtual
// dataset, each once (by object header), in the walk's order: depth first, names in
// order.
func virtualDatasets(f *File) ([]vdsLink, error) {
	root, err := f.RootAddr()
	if err != nil {
		return nil, err
	}
	seen := map[uint64]bool{root: true}
	var out []vdsLink
	var walk func(path string, addr uint64) error
	walk = func(path string, addr uint64) error {
		links, err := f.Links(addr)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, l := range links {
			if seen[l.Addr] {
				continue
			}
			seen[l.Addr] = true
			p := path + "/" + l.Name
			o, err := f.Inspect(l.Addr)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			switch {
			case o.IsGroup:
				if err := walk(p, l.Addr); err != nil {
					return err
				}
			case o.IsDataset:
				lay, err := f.layout(l.Addr)
				if err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
				if lay.class == classVirtual {
					out = append(out, vdsLink{p, l.Addr})
				}
			}
		}
		return nil
	}
	return out, walk("", root)
}

// readUint is the little-endian n-byte field at the start of p.
func readUint(p []byte, n int) uint64 {
	var b [8]byte
	copy(b[:], p[:n])
	return binary.LittleEndian.Uint64(b[:])
}
