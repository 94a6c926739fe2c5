package versions

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// TestFastPathMatchesLibhdf5 reads every stored chunk of every fixture version both ways —
// by file offset, decoded in Go, and through libhdf5 — and requires the same bytes inside
// the chunk's trimmed extent. It also requires the fast path to have served every chunk
// of the data_version 4 files (their filters all decode in Go).
func TestFastPathMatchesLibhdf5(t *testing.T) {
	manifests, err := fixture.All()
	require.NoError(t, err)
	for _, m := range manifests {
		t.Run(m.File, func(t *testing.T) {
			f, err := Open(m.H5)
			require.NoError(t, err)
			defer f.Close()
			fast := 0
			for _, v := range m.Versions {
				for p, md := range v.Datasets {
					if md.IsString() {
						continue
					}
					d, err := f.Dataset(VersionsGroup + "/" + v.Name + "/" + p)
					require.NoError(t, err)
					size := d.Type.Size
					for _, c := range d.Chunks {
						size *= int(c)
					}
					for _, b := range d.blocks() {
						got, ok, err := f.readSlot(d, b.off, size)
						require.NoError(t, err)
						if !ok {
							continue
						}
						fast++
						want := make([]byte, size)
						start := make([]int64, len(d.Chunks))
						start[0] = b.off
						require.NoError(t, d.raw.ReadBox(start, d.Chunks, d.Chunks, make([]int64, len(d.Chunks)), want))
						require.Equal(t, want, got, "%s/%s slot %d", v.Name, p, b.off)
					}
				}
			}
			if m.DataVersion == 4 && m.File != "strings.h5" {
				require.Positive(t, fast, "the fast path served nothing")
			}
		})
	}
}

// TestLocate: every range ReadOrLocate places in the file holds the dataset's bytes.
func TestLocate(t *testing.T) {
	f, err := Open(fixture.Dir() + "/basic_1d.h5")
	require.NoError(t, err)
	defer f.Close()
	raw, err := os.ReadFile(fixture.Dir() + "/basic_1d.h5")
	require.NoError(t, err)
	hits := 0
	for _, v := range []string{"v1", "v2", "v3", "v4"} {
		d, err := f.Dataset(VersionsGroup + "/" + v + "/x")
		require.NoError(t, err)
		all := make([]byte, d.Size())
		_, err = d.ReadAt(all, 0)
		require.NoError(t, err)
		for off := int64(0); off < d.Size(); off++ {
			for n := int64(1); off+n <= d.Size(); n++ {
				if _, fo, ok, err := d.ReadOrLocate(make([]byte, n), off, true); err == nil && ok {
					hits++
					require.Equal(t, all[off:off+n], raw[fo:fo+n], "%s [%d, +%d)", v, off, n)
				}
			}
		}
	}
	require.Positive(t, hits)
}
