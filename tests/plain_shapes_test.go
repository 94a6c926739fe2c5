package tests

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"

	"github.com/pkg/xattr"
	"github.com/stretchr/testify/require"
)

// TestPlainShapes mounts a plain file holding a dataset of each dataspace and layout h5py
// writes (tests/py/make_plain_shapes.py): a scalar serves its element's bytes (size = item
// size), a null dataspace and zero-length datasets are empty files, compact and contiguous
// layouts read whole, and external storage is refused with EOPNOTSUPP. h5py then reads
// every dataset itself and compares with the mount.
func TestPlainShapes(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command(python(t), "py/make_plain_shapes.py", dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	file := filepath.Join(dir, "plain_shapes.h5")
	m := mount(t, file)

	be := func(v any) []byte {
		var b bytes.Buffer
		require.NoError(t, binary.Write(&b, binary.BigEndian, v))
		return b.Bytes()
	}
	le := func(v any) []byte {
		var b bytes.Buffer
		require.NoError(t, binary.Write(&b, binary.LittleEndian, v))
		return b.Bytes()
	}
	contiguous := make([]float64, 12)
	for i := range contiguous {
		contiguous[i] = float64(i)
	}
	for _, tc := range []struct {
		name, dtype, shape string
		want               []byte
	}{
		{"scalar_f8", "<f8", "[]", le(math.Float64bits(2.5))},
		{"scalar_i4be", ">i4", "[]", be(int32(-7))},
		{"scalar_bytes", "|S3", "[]", []byte("hi!")},
		{"scalar_str", "O", "[]", []byte("\"héllo\"\n")},
		{"scalar_compound", "", "[]", append(le(uint16(1)), le(float32(2))...)},
		{"null", "<f8", "null", []byte{}},
		{"zero_length", "<i2", "[0]", []byte{}},
		{"zero_rows_chunked", "<f4", "[0,3]", []byte{}},
		{"contiguous", "<f8", "[3,4]", le(contiguous)},
		{"compact", ">u2", "[2,3]", be([]uint16{0, 1, 2, 3, 4, 5})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(m.Dir, tc.name)
			st, err := os.Stat(path)
			require.NoError(t, err)
			require.Equal(t, int64(len(tc.want)), st.Size())
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, tc.want, b)
			// A read past the element returns nothing, one inside it the rest.
			f, err := os.Open(path)
			require.NoError(t, err)
			defer f.Close()
			buf := make([]byte, len(tc.want)+16)
			n, _ := f.ReadAt(buf, int64(len(tc.want)))
			require.Zero(t, n)
			if len(tc.want) > 1 {
				n, _ = f.ReadAt(buf, 1)
				require.Equal(t, tc.want[1:], buf[:n])
			}
			shape, err := xattr.Get(path, "user.vh5fs.shape")
			require.NoError(t, err)
			require.Equal(t, tc.shape, string(shape))
			if tc.dtype != "" {
				dtype, err := xattr.Get(path, "user.vh5fs.dtype")
				require.NoError(t, err)
				require.Equal(t, tc.dtype, string(dtype))
			}
		})
	}

	// External storage: the raw data lives in another file, which libhdf5 looks for
	// relative to the reader's directory. Refused, and the daemon says why.
	_, err = os.Stat(filepath.Join(m.Dir, "external"))
	require.ErrorIs(t, err, syscall.EOPNOTSUPP)
	_, err = os.ReadFile(filepath.Join(m.Dir, "external"))
	require.ErrorIs(t, err, syscall.EOPNOTSUPP)
	m.logged(t, regexp.QuoteMeta("/external: unsupported dataset: its raw data is in 1 external file(s) (HDF5 external storage), which vh5fs does not serve"))

	// h5py reads each dataset and compares: the bytes of its value in the file's dtype,
	// the dtype and shape xattrs.
	check := `import h5py, json, numpy as np, os, sys
f, mnt = h5py.File(sys.argv[1], "r"), sys.argv[2]
n = 0
for name, d in f.items():
    if name == "external":
        continue
    got = open(os.path.join(mnt, name), "rb").read()
    shape = json.loads(os.getxattr(os.path.join(mnt, name), "user.vh5fs.shape"))
    if d.shape is None:
        assert got == b"" and shape is None, name
    elif h5py.check_string_dtype(d.dtype) and h5py.check_string_dtype(d.dtype).length is None:
        assert got == (json.dumps(d.asstr()[()], ensure_ascii=False) + "\n").encode(), (name, got)
    else:
        assert got == np.asarray(d[()], dtype=d.dtype).tobytes(), (name, got)
        assert np.array_equal(np.frombuffer(got, dtype=d.dtype).reshape(d.shape), d[()]), name
    if d.shape is not None:
        assert tuple(shape) == d.shape, (name, shape, d.shape)
    n += 1
print(n)`
	out, err = exec.Command(python(t), "-c", check, file, m.Dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "10\n", string(out), "every dataset but external compared")
}
