package commit_test

import (
	"encoding/binary"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/fsck"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/versions"
)

// deadCommit leaves in file what a commit killed between its raw_data/hash_table appends
// and largest_index would: two garbage slots past largest_index in raw_data, two garbage
// rows past it in hash_table, and a version group "dead" with committed=False.
const deadCommit = `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    g = f["_version_data/x"]
    raw, table = g["raw_data"], g["hash_table"]
    n = int(table.attrs["largest_index"])
    c = raw.chunks[0]
    raw.resize(((n + 2) * c,))
    raw[n * c:] = 777
    table.resize((n + 2,))
    row = np.zeros((), dtype=table.dtype)
    row["hash"] = np.full(32, 0xAB, dtype=np.uint8)
    table[n] = row
    table[n + 1] = row
    v = f["_version_data/versions"].create_group("dead")
    v.attrs["prev_version"] = "v4"
    v.attrs["committed"] = False
    print(n, c)
`

// TestNextCommitTrimsDeadTails: the next commit writes its chunks at largest_index over the
// dead commit's garbage, sizes raw_data and hash_table to exactly what largest_index then
// says, never lists the uncommitted version, and leaves a file fsck finds clean with every
// earlier version unchanged.
func TestNextCommitTrimsDeadTails(t *testing.T) {
	file := fixture.Copy(t, fixture.Dir()+"/basic_1d.h5") // v4: int64 [0 1 2 3 40 555], chunks 4
	out, err := exec.Command("/usr/bin/python3", "-c", deadCommit, file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	var largest, rows int64
	_, err = fmt.Sscan(strings.TrimSpace(string(out)), &largest, &rows)
	require.NoError(t, err)

	f, err := versions.OpenRW(file)
	require.NoError(t, err)
	vs, err := f.Versions()
	require.NoError(t, err)
	for _, v := range vs {
		require.NotEqual(t, "dead", v.Name, "an uncommitted version is not listed")
	}
	before := map[string][]byte{}
	for _, v := range vs {
		before[v.Name] = readAll(t, f, v.Name)
	}
	c, err := commit.Open(f, commit.Options{})
	require.NoError(t, err)
	d, err := f.Dataset(versions.VersionsGroup + "/v4/x")
	require.NoError(t, err)
	arr, err := commit.NewStaged(d)
	require.NoError(t, err)
	_, err = arr.WriteAt(binary.LittleEndian.AppendUint64(nil, 12345), 0, d.ChunkSource())
	require.NoError(t, err)
	require.NoError(t, c.SetNextName("after"))
	res, err := c.Commit(commit.Change{Base: "v4", Dataset: "x", Array: arr})
	require.NoError(t, err)
	require.Equal(t, 1, res.Written)
	c.Close()
	require.NoError(t, f.Close())

	check := `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    g = f["_version_data/x"]
    print(int(g["hash_table"].attrs["largest_index"]), g["hash_table"].shape[0], g["raw_data"].shape[0],
          int(g["hash_table"][int(g["hash_table"].attrs["largest_index"]) - 1]["shape"][0]),
          f["_version_data/versions/after/x"][0], f["_version_data/versions"].attrs["current_version"])
`
	out, err = exec.Command("/usr/bin/python3", "-c", check, file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	want := fmt.Sprintf("%d %d %d %d 12345 after", largest+1, largest+1, (largest+1)*rows, largest*rows)
	require.Equal(t, want, strings.TrimSpace(string(out)),
		"largest_index, hash_table rows, raw_data rows, the new row's start, the data, current_version")

	findings, err := fsck.Check(file)
	require.NoError(t, err)
	require.Empty(t, findings, fsck.Summary(findings))
	f, err = versions.Open(file)
	require.NoError(t, err)
	defer f.Close()
	for name, b := range before {
		require.Equal(t, b, readAll(t, f, name), "version %s unchanged", name)
	}
}

// readAll reads version v's dataset x.
func readAll(t *testing.T, f *versions.File, v string) []byte {
	d, err := f.Dataset(versions.VersionsGroup + "/" + v + "/x")
	require.NoError(t, err)
	b := make([]byte, d.Size())
	_, err = d.ReadAt(b, 0)
	require.NoError(t, err)
	return b
}
