package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// TestFixturesThroughMount mounts every reference file and reads every dataset of every
// version with whole-file reads and with odd-sized preads at odd offsets, comparing with
// the manifest versioned-hdf5 wrote.
func TestFixturesThroughMount(t *testing.T) {
	manifests, err := fixture.All()
	require.NoError(t, err)
	require.NotEmpty(t, manifests)
	for _, m := range manifests {
		t.Run(m.File, func(t *testing.T) {
			t.Parallel()
			mnt := mount(t, m.H5)

			names := readDirNames(t, filepath.Join(mnt.Dir, "versions"))
			require.Equal(t, m.VersionNames(), names)
			target, err := os.Readlink(filepath.Join(mnt.Dir, "current"))
			require.NoError(t, err)
			require.Equal(t, "versions/"+m.CurrentVersion, target)
			require.Equal(t, []string{"at", "branches", "current", "tags", "versions"}, readDirNames(t, mnt.Dir))

			checkManifest(t, mnt.Dir, m)
		})
	}
}

// checkManifest reads every dataset of every version of m through the mount at mnt, with
// whole-file reads and with odd-sized preads at odd offsets, comparing with the manifest.
func checkManifest(t *testing.T, mnt string, m *fixture.Manifest) {
	t.Helper()
	rng := rand.New(rand.NewSource(1))
	for _, v := range m.Versions {
		vdir := filepath.Join(mnt, "versions", v.Name)
		datasets, groups := walk(t, vdir, "")
		require.Equal(t, keys(v.Datasets), datasets, "datasets of %s (deleted ones must be absent)", v.Name)
		for g := range v.Groups {
			require.Contains(t, groups, g, "group %s of %s", g, v.Name)
		}
		for p, d := range v.Datasets {
			path := filepath.Join(vdir, p)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			if d.IsString() {
				want, err := d.Text()
				require.NoError(t, err)
				require.Equal(t, string(want), string(data), path)
				checkPreads(t, path, data, nil, nil, rng)
				continue
			}
			sum := sha256.Sum256(data)
			require.Equal(t, *d.SHA256, hex.EncodeToString(sum[:]), path)
			st, err := os.Stat(path)
			require.NoError(t, err)
			require.EqualValues(t, d.NBytes, st.Size())
			require.Equal(t, os.FileMode(0o444), st.Mode().Perm())
			checkPreads(t, path, data, d.Shape, d.Chunks, rng)
		}
	}
}

// checkPreads reads odd sizes at odd offsets, around every chunk boundary along axis 0,
// with O_DIRECT so that each one reaches vh5fs rather than the page cache.
func checkPreads(t *testing.T, path string, want []byte, shape, chunks []int64, rng *rand.Rand) {
	t.Helper()
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_DIRECT|syscall.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer syscall.Close(fd)
	size := int64(len(want))
	offsets := []int64{0, 1, 3, size / 2, size - 1, size - 3, size, size + 5}
	// Around each chunk boundary along axis 0 (chunk rows times the bytes of one row).
	if len(chunks) > 0 && size > 0 && shape[0] > 0 {
		rowBytes := size / shape[0]
		for b := chunks[0] * rowBytes; b < size; b += chunks[0] * rowBytes {
			offsets = append(offsets, b-1, b-3)
		}
		for i := 0; i < 8; i++ {
			offsets = append(offsets, rng.Int63n(size))
		}
	}
	for _, off := range offsets {
		for _, n := range []int{1, 3, 7, 4097} {
			if off < 0 {
				continue
			}
			buf := make([]byte, n)
			got, err := syscall.Pread(fd, buf, off)
			require.NoError(t, err, "pread %s %d@%d", path, n, off)
			end := min(off+int64(n), size)
			if off >= size {
				require.Equal(t, 0, got, "pread past the end of %s", path)
				continue
			}
			require.Equal(t, string(want[off:end]), string(buf[:got]), "pread %s %d bytes at %d", path, n, off)
		}
	}
}

func readDirNames(t *testing.T, dir string) []string {
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// walk returns the dataset files and group directories below dir, relative to it.
func walk(t *testing.T, dir, prefix string) (datasets, groups []string) {
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() {
			groups = append(groups, prefix+e.Name())
			d, g := walk(t, filepath.Join(dir, e.Name()), prefix+e.Name()+"/")
			datasets = append(datasets, d...)
			groups = append(groups, g...)
		} else {
			require.True(t, e.Type().IsRegular(), "%s is not a regular file", e.Name())
			datasets = append(datasets, prefix+e.Name())
		}
	}
	sort.Strings(datasets)
	return datasets, groups
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
