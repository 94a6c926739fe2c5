package versions

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/chunkstore"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/h5meta"
	"github.com/vh5fs/vh5fs/internal/fixture"
)

// TestGroupsMatchLibhdf5 walks every group of every fixture (and the extra files) with
// libhdf5 and with h5meta, and requires the same links, kinds and attribute values wherever
// h5meta decodes them, and the same Versions either way.
func TestGroupsMatchLibhdf5(t *testing.T) {
	var files []string
	for _, pat := range []string{"/*.h5", "/legacy/*.h5", "/../extra/*.h5"} {
		m, err := filepath.Glob(fixture.Dir() + pat)
		require.NoError(t, err)
		files = append(files, m...)
	}
	require.NotEmpty(t, files)
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			hf, err := h5.Open(path)
			require.NoError(t, err)
			defer hf.Close()
			raw, m := openBytes(t, path)
			defer raw.Close()
			decoded := 0
			var walk func(p string)
			walk = func(p string) {
				addr, err := hf.ObjectAddr(p)
				require.NoError(t, err)
				o, err := m.Inspect(addr)
				require.NoError(t, err, p)
				kind, err := hf.Kind(p)
				require.NoError(t, err)
				require.Equal(t, kind == h5.KindGroup, o.IsGroup, p)
				require.Equal(t, kind == h5.KindDataset, o.IsDataset, p)
				attrs, err := hf.Attrs(p)
				require.NoError(t, err)
				require.Len(t, o.Attrs, len(attrs), p)
				for i, a := range attrs {
					require.Equal(t, a.Name, o.Attrs[i].Name, p)
					if o.Attrs[i].Value != nil {
						require.Equal(t, a.Value, o.Attrs[i].Value, "%s attribute %s", p, a.Name)
						decoded++
					}
				}
				if !o.IsGroup {
					return
				}
				members, err := hf.Members(p)
				require.NoError(t, err)
				links, err := m.Links(addr)
				require.NoError(t, err, p)
				require.Len(t, links, len(members), p)
				for i, l := range links {
					require.Equal(t, members[i].Name, l.Name, p)
					child := filepath.Join(p, l.Name)
					ca, err := hf.ObjectAddr(child)
					require.NoError(t, err)
					require.Equal(t, ca, l.Addr, child)
					walk(child)
				}
			}
			walk("/")
			require.Positive(t, decoded, "no attribute decoded")

			if k, _ := hf.Kind(VersionsGroup); k == h5.KindGroup {
				store, err := chunkstore.Open(path)
				require.NoError(t, err)
				defer store.Close()
				f := &File{h: hf, store: store, versioned: true, meta: map[string]Version{}}
				fast := f.snapshot()
				require.NoError(t, fast.listErr)
				f.meta = map[string]Version{}
				slow, err := f.versionsFromHDF5()
				require.NoError(t, err)
				slices.SortFunc(slow, func(a, b Version) int { return strings.Compare(a.Name, b.Name) })
				require.Equal(t, slow, fast.versions)
			}
		})
	}
}

// TestInspectTypes: attribute types and group formats beyond the fixtures': libver latest
// (link messages) and earliest (symbol tables); many attributes on one object (dense
// storage in libver latest, which h5meta leaves to libhdf5).
func TestInspectTypes(t *testing.T) {
	py, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		t.Skip("python3 with h5py not available")
	}
	path := filepath.Join(t.TempDir(), "types.h5")
	script := `
import sys, h5py, numpy as np
for libver, name in (("latest", sys.argv[1]), ("earliest", sys.argv[1] + ".old")):
    with h5py.File(name, "w", libver=libver) as f:
        g = f.create_group("g")  # at most 8 attributes per object stay compact in libver latest
        g.attrs["vstr"] = "température"
        g.attrs["empty"] = ""
        g.attrs["fixed"] = np.bytes_(b"abc")
        g.attrs["i8"] = np.int8(-5)
        g.attrs["u16"] = np.uint16(65000)
        g.attrs["i64"] = np.int64(-1 << 40)
        h = f.create_group("h")
        h.attrs["f4"] = np.float32(1.5)
        h.attrs["f8"] = np.float64(-2.25)
        h.attrs["yes"] = True
        h.attrs["no"] = np.bool_(False)
        h.attrs["arr"] = np.arange(3)
        g.create_dataset("d", data=np.arange(4))
        f.create_group("g/sub")
        f["soft"] = h5py.SoftLink("/g")
        many = f.create_group("many")
        for i in range(40):
            many.attrs["a%02d" % i] = i
`
	out, err := exec.Command(py, "-c", script, path).CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, p := range []string{path, path + ".old"} {
		hf, err := h5.Open(p)
		require.NoError(t, err)
		defer hf.Close()
		raw, m := openBytes(t, p)
		defer raw.Close()
		for _, g := range []string{"/g", "/h"} {
			addr, err := hf.ObjectAddr(g)
			require.NoError(t, err)
			o, err := m.Inspect(addr)
			require.NoError(t, err, "%s %s", p, g)
			require.True(t, o.IsGroup)
			want, err := hf.Attrs(g)
			require.NoError(t, err)
			require.Len(t, o.Attrs, len(want))
			for i, a := range want {
				if a.Name == "arr" {
					require.Nil(t, o.Attrs[i].Value, "arrays are left to libhdf5")
					continue
				}
				require.Equal(t, a.Value, o.Attrs[i].Value, "%s %s", p, a.Name)
			}
		}
		g, err := hf.ObjectAddr("/g")
		require.NoError(t, err)
		links, err := m.Links(g)
		require.NoError(t, err)
		require.Equal(t, []h5meta.Link{{Name: "d", Addr: addrOf(t, hf, "/g/d")}, {Name: "sub", Addr: addrOf(t, hf, "/g/sub")}}, links)
		links, err = m.Links(addrOf(t, hf, "/"))
		require.NoError(t, err)
		require.Len(t, links, 3, "g, h, many: the soft link is left out")
		if _, err := m.Inspect(addrOf(t, hf, "/many")); err != nil {
			require.ErrorIs(t, err, h5meta.ErrUnsupported, p)
		}
	}
}

func addrOf(t *testing.T, hf *h5.File, path string) uint64 {
	a, err := hf.ObjectAddr(path)
	require.NoError(t, err)
	return a
}

func openBytes(t *testing.T, path string) (*os.File, *h5meta.File) {
	raw, err := os.Open(path)
	require.NoError(t, err)
	st, err := raw.Stat()
	require.NoError(t, err)
	m, err := h5meta.Open(raw, st.Size())
	require.NoError(t, err)
	return raw, m
}
