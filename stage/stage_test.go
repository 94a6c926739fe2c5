package stage

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/fsck"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/h5json"
	"github.com/vh5fs/vh5fs/internal/conform"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/stagedir"
	"github.com/vh5fs/vh5fs/versions"
)

// open opens file read-write with a Manager of its stages (a store of budget bytes), as
// a mount does; closing it saves the stages and closes the file.
func open(t *testing.T, file string, budget int64) (*versions.File, *Manager, func()) {
	t.Helper()
	f, m, closeAll := openCrashable(t, file, budget)
	return f, m, func() { require.NoError(t, closeAll()) }
}

// openCrashable is open whose closer returns the file's Close error: a file whose sync was
// stopped as a crash (h5's InjectSyncFault) cannot close cleanly.
func openCrashable(t *testing.T, file string, budget int64) (*versions.File, *Manager, func() error) {
	t.Helper()
	f, err := versions.OpenRW(file)
	require.NoError(t, err)
	c, err := commit.Open(f, commit.Options{StageMem: budget})
	require.NoError(t, err)
	m, err := Open(c)
	require.NoError(t, err)
	closed := false
	closeAll := func() error {
		if closed {
			return nil
		}
		closed = true
		require.NoError(t, m.Close())
		c.Close()
		return f.Close()
	}
	t.Cleanup(func() { closeAll() })
	return f, m, closeAll
}

// apply applies the golden's file operations to st, as fsnode turns them into calls.
func apply(t *testing.T, st *Stage, ops []fixture.StageOp) {
	t.Helper()
	for _, op := range ops {
		switch op.Op {
		case "pwrite":
			d, err := st.Open(op.Path)
			require.NoError(t, err)
			b, err := op.Data()
			require.NoError(t, err)
			_, err = d.WriteAt(b, op.Offset)
			require.NoError(t, err)
		case "truncate":
			d, err := st.Open(op.Path)
			require.NoError(t, err)
			require.NoError(t, d.Truncate(op.Size))
		case "create":
			_, err := st.Create(op.Path)
			require.NoError(t, err)
			require.NoError(t, st.SetSpec(op.Path, op.Spec))
		case "rm":
			require.NoError(t, st.Unlink(op.Path))
		case "mkdir":
			require.NoError(t, st.Mkdir(op.Path))
		case "setattr":
			require.NoError(t, st.SetAttr(op.Path, op.Name, []byte(op.JSON)))
		default:
			t.Fatalf("unknown op %q", op.Op)
		}
	}
}

func TestGoldenStage(t *testing.T) {
	e, err := fixture.StageGolden()
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		budget  int64
		restart bool // close and reopen the stage between the ops and the commit
	}{
		{"in memory", 32 << 20, false},
		{"spilled", 0, false},
		{"kept across a remount", 32 << 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := fixture.Copy(t, e.Before)
			f, m, closeAll := open(t, file, tc.budget)
			st, err := m.Create("golden")
			require.NoError(t, err)
			require.Equal(t, e.BaseVersion, st.Base())
			apply(t, st, e.Ops)
			if tc.restart {
				closeAll()
				f, m, closeAll = open(t, file, tc.budget)
				require.Equal(t, []string{"golden"}, m.Names())
			}
			res, err := m.Commit("golden", "golden")
			require.NoError(t, err)
			require.Equal(t, "golden", res.Name)
			require.Equal(t, e.BaseVersion, res.Base)
			require.Empty(t, m.Names())
			_, err = st.List("")
			require.ErrorIs(t, err, ErrStale, "a committed stage shows nothing, not its base")
			_, err = os.Stat(stagedir.Of(file) + "/golden")
			require.ErrorIs(t, err, os.ErrNotExist, "a committed stage leaves no files")
			cur, err := f.CurrentVersion()
			require.NoError(t, err)
			require.Equal(t, "golden", cur)
			closeAll()
			require.NoError(t, conform.StageGolden(file, e))
		})
	}
}

func TestTreeOperations(t *testing.T) {
	e, err := fixture.StageGolden()
	require.NoError(t, err)
	file := fixture.Copy(t, e.Before)
	_, m, _ := open(t, file, 1<<20)
	st, err := m.Create("s")
	require.NoError(t, err)

	names := func(dir string) []string {
		ents, err := st.List(dir)
		require.NoError(t, err)
		var out []string
		for _, e := range ents {
			out = append(out, e.Name)
		}
		return out
	}
	require.Equal(t, []string{"old", "prices", "volume"}, names(""))
	require.Equal(t, []string{"x"}, names("old"))

	cases := []struct {
		name string
		do   func() error
		want error
	}{
		{"a stage of a version's name", func() error { _, err := m.Create("r1"); return err }, ErrExist},
		{"a stage of a stage's name", func() error { _, err := m.Create("s"); return err }, ErrExist},
		{"an invalid stage name", func() error { _, err := m.Create("a/b"); return err }, ErrInvalid},
		{"mkdir of a dataset's name", func() error { return st.Mkdir("prices") }, ErrExist},
		{"mkdir in a missing group", func() error { return st.Mkdir("no/such") }, ErrNotExist},
		{"rmdir of a group with a dataset", func() error { return st.Rmdir("old") }, ErrNotEmpty},
		{"rmdir of a dataset", func() error { return st.Rmdir("prices") }, ErrNotDir},
		{"unlink of a group", func() error { return st.Unlink("old") }, ErrIsDir},
		{"unlink of nothing", func() error { return st.Unlink("nothing") }, ErrNotExist},
		{"create over a dataset", func() error { _, err := st.Create("volume"); return err }, ErrExist},
		{"a reserved top-level name", func() error { return st.Mkdir("versions") }, ErrInvalid},
		{"a spec for a base dataset", func() error { return st.SetSpec("prices", []byte(`{"dtype": "<f8"}`)) }, ErrInvalid},
		{"an attribute of null", func() error { return st.SetAttr("prices", "a", []byte(`null`)) }, ErrInvalid},
		{"an attribute of a broken list", func() error { return st.SetAttr("prices", "a", []byte(`[1, 2`)) }, ErrInvalid},
		{"an attribute of a ragged list", func() error { return st.SetAttr("prices", "a", []byte(`[[1], [2, 3]]`)) }, ErrInvalid},
		{"a reserved attribute", func() error { return st.SetAttr("prices", "raw_data", []byte(`"x"`)) }, ErrInvalid},
		{"removing a missing attribute", func() error { return st.RemoveAttr("prices", "nope") }, ErrNoAttr},
		{"discarding a stage with datasets", func() error { return m.Remove("s") }, ErrNotEmpty},
		{"rebasing onto a missing version", func() error { return st.SetBase("nope") }, ErrNotExist},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.ErrorIs(t, c.do(), c.want)
		})
	}

	// A group removed and made again is empty; the base's datasets in it are gone.
	require.NoError(t, st.Unlink("old/x"))
	require.NoError(t, st.Rmdir("old"))
	require.Equal(t, []string{"prices", "volume"}, names(""))
	require.NoError(t, st.Mkdir("old"))
	require.Empty(t, names("old"))
	k, err := st.Kind("old/x")
	require.NoError(t, err)
	require.Equal(t, h5.KindMissing, k)

	// A file opened before it is described writes the described dataset; a dataset that
	// left the stage answers ESTALE.
	early, err := st.Create("old/early")
	require.NoError(t, err)
	require.NoError(t, st.SetSpec("old/early", []byte(`{"dtype": "<i8"}`)))
	_, err = early.WriteAt(make([]byte, 16), 0)
	require.NoError(t, err)
	require.Equal(t, "<i8", early.Spec().DType)
	again, err := st.Open("old/early")
	require.NoError(t, err)
	require.Same(t, early, again)
	require.Equal(t, int64(16), again.Size())
	require.NoError(t, st.Unlink("old/early"))
	_, err = early.WriteAt([]byte{1}, 0)
	require.ErrorIs(t, err, ErrStale)
	_, err = early.ReadAt(make([]byte, 1), 0)
	require.ErrorIs(t, err, ErrStale)

	// A created file is 1-D bytes until described, and takes no description after a write.
	d, err := st.Create("old/notes")
	require.NoError(t, err)
	_, err = d.WriteAt([]byte("hello"), 0)
	require.NoError(t, err)
	require.Equal(t, int64(5), d.Size())
	require.Equal(t, "|u1", d.Spec().DType)
	require.ErrorIs(t, st.SetSpec("old/notes", []byte(`{"dtype": "<f8"}`)), ErrInvalid)
	require.ErrorIs(t, st.SetBase("r1"), ErrBusy, "a changed stage is not rebased")

	// Attributes: the base's, with the stage's changes.
	require.NoError(t, st.SetAttr("volume", "unit", []byte(`"shares"`)))
	attrs, err := st.Attrs("volume")
	require.NoError(t, err)
	require.Equal(t, []Attr{{"unit", json.RawMessage(`"shares"`)}}, attrs)
	require.NoError(t, st.SetAttr("volume", "note", []byte(`plain <text>, as setfattr -v '"..."' sends it`)))
	attrs, err = st.Attrs("volume")
	require.NoError(t, err)
	require.Equal(t, []Attr{{"note", json.RawMessage(`"plain <text>, as setfattr -v '\"...\"' sends it"`)}, {"unit", json.RawMessage(`"shares"`)}}, attrs)
	require.NoError(t, st.RemoveAttr("volume", "unit"))
	require.NoError(t, st.RemoveAttr("volume", "note"))
	attrs, err = st.Attrs("volume")
	require.NoError(t, err)
	require.Empty(t, attrs)

	// versioned-hdf5 finds data groups by walking down to the first with raw_data: a new
	// dataset's data group may be neither inside another nor around one.
	n, err := m.Create("n")
	require.NoError(t, err)
	require.NoError(t, n.Unlink("old/x"))
	require.NoError(t, n.Mkdir("old/x"))
	_, err = n.Create("old/x/y")
	require.ErrorIs(t, err, ErrInvalid, "inside old/x's data group")
	require.NoError(t, n.Rmdir("old/x"))
	require.NoError(t, n.Rmdir("old"))
	_, err = n.Create("old")
	require.ErrorIs(t, err, ErrInvalid, "around old/x's data group")

	// Discarding: empty the stage, then remove it.
	for _, p := range []string{"old/notes", "prices", "volume"} {
		require.NoError(t, st.Unlink(p))
	}
	require.NoError(t, st.Rmdir("old"))
	require.NoError(t, m.Remove("s"))
	require.Equal(t, []string{"n"}, m.Names())
	_, err = os.Stat(stagedir.Of(file) + "/s")
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestSpecs(t *testing.T) {
	for _, c := range []struct {
		json string
		ok   bool
		want h5.DataSpec
	}{
		{`{}`, true, h5.DataSpec{DType: "<f4", Chunks: []int64{4096}, Fill: []byte{0, 0, 0, 0}, Gzip: -1}},
		{`{"dtype": "<f8", "shape": [0, 3], "chunks": [16, 3], "fillvalue": 1.5, "compression": "gzip"}`, true,
			h5.DataSpec{DType: "<f8", Chunks: []int64{16, 3}, Fill: []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x3f}, Gzip: 4}},
		{`{"dtype": ">i2", "fillvalue": -2, "compression": "lzf", "shuffle": true}`, true,
			h5.DataSpec{DType: ">i2", Chunks: []int64{4096}, Fill: []byte{0xff, 0xfe}, Gzip: -1, LZF: true, Shuffle: true}},
		{`{"dtype": "|b1", "fillvalue": true}`, true, h5.DataSpec{DType: "|b1", Chunks: []int64{4096}, Fill: []byte{1}, Gzip: -1}},
		// NaN as numpy stores it (Go's math.NaN() has another payload), and raw bytes.
		{`{"dtype": "<f8", "fillvalue": "NaN"}`, true, h5.DataSpec{DType: "<f8", Chunks: []int64{4096}, Fill: []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f}, Gzip: -1}},
		{`{"dtype": ">f4", "fillvalue": "NaN"}`, true, h5.DataSpec{DType: ">f4", Chunks: []int64{4096}, Fill: []byte{0x7f, 0xc0, 0, 0}, Gzip: -1}},
		{`{"dtype": "<i2", "fillvalue": {"bytes_b64": "AQI="}}`, true, h5.DataSpec{DType: "<i2", Chunks: []int64{4096}, Fill: []byte{1, 2}, Gzip: -1}},
		{`{"dtype": "<i4", "fillvalue": {"bytes_b64": "AQI="}}`, false, h5.DataSpec{}}, // 2 bytes, not 4
		{`{"shape": [0, 3]}`, false, h5.DataSpec{}},                  // 2-D without chunks
		{`{"dtype": "<f8", "chunks": [0]}`, false, h5.DataSpec{}},    // empty chunks
		{`{"dtype": "<u1", "fillvalue": 300}`, false, h5.DataSpec{}}, // out of range
		{`{"compression": "zstd"}`, false, h5.DataSpec{}},            // unknown filter
		{`{"compression": "gzip", "compression_opts": 11}`, false, h5.DataSpec{}},
		{`{"dtype": "<f8", "colour": "red"}`, false, h5.DataSpec{}},                        // unknown field
		{`{"dtype": "O"}`, true, h5.DataSpec{DType: "O", Chunks: []int64{4096}, Gzip: -1}}, // variable-length UTF-8 strings
		{`{"dtype": "O", "encoding": "ascii", "shape": [0, 2], "chunks": [8, 2], "compression": "gzip"}`, true,
			h5.DataSpec{DType: "O", Chunks: []int64{8, 2}, Gzip: 4}},
		{`{"dtype": "O", "encoding": "latin-1"}`, false, h5.DataSpec{}},
		{`{"dtype": "O", "fillvalue": "x"}`, false, h5.DataSpec{}}, // strings have no fill value
		{`{"dtype": "<i4", "encoding": "ascii"}`, false, h5.DataSpec{}},
		{`not json`, false, h5.DataSpec{}},
	} {
		t.Run(c.json, func(t *testing.T) {
			s, err := ParseSpec([]byte(c.json))
			if !c.ok {
				require.ErrorIs(t, err, ErrInvalid)
				return
			}
			require.NoError(t, err)
			got, err := s.DataSpec()
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

// TestConcurrentWriters: handles of one dataset in a stage share its state; writers on
// disjoint ranges, concurrently (run under -race by make test), all land.
func TestConcurrentWriters(t *testing.T) {
	e, err := fixture.StageGolden()
	require.NoError(t, err)
	file := fixture.Copy(t, e.Before)
	_, m, _ := open(t, file, 64<<10)
	st, err := m.Create("s")
	require.NoError(t, err)
	_, err = st.Create("big")
	require.NoError(t, err)
	require.NoError(t, st.SetSpec("big", []byte(`{"dtype": "|u1", "chunks": [1000]}`)))
	const writers, per = 4, 50_000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := st.Open("big")
			if err != nil {
				t.Error(err)
				return
			}
			buf := make([]byte, 1000)
			for i := range buf {
				buf[i] = byte(w + 1)
			}
			for off := int64(w * per); off < int64((w+1)*per); off += 1000 {
				if _, err := d.WriteAt(buf, off); err != nil {
					t.Error(err)
					return
				}
			}
			if err := st.Sync(d); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	d, err := st.Open("big")
	require.NoError(t, err)
	require.Equal(t, int64(writers*per), d.Size())
	got := make([]byte, writers*per)
	_, err = d.ReadAt(got, 0)
	require.NoError(t, err)
	for i, b := range got {
		require.Equal(t, byte(i/per+1), b, "byte %d", i)
	}
	res, err := m.Commit("s", "")
	require.NoError(t, err)
	require.Equal(t, writers, res.Written, "each writer's chunks are equal: one slot each")
	require.Equal(t, writers*per/1000-writers, res.Reused)
}

// TestStageCommitCrash stops a stage's commit as a killed process would, before each step
// of its sync. Before anything repairs the file, h5py sees the base alone, or the new
// version whole; then recovery (as the next read-write open does) leaves either no new
// version or exactly versioned-hdf5's, and the stage itself is still kept on disk.
func TestStageCommitCrash(t *testing.T) {
	e, err := fixture.StageGolden()
	require.NoError(t, err)
	for _, step := range []string{"tail", "fsync", "journal", "jsync", "dirsync", "apply", "async", "remove"} {
		t.Run(step, func(t *testing.T) {
			file := fixture.Copy(t, e.Before)
			f, m, closeAll := openCrashable(t, file, 32<<20)
			st, err := m.Create("golden")
			require.NoError(t, err)
			apply(t, st, e.Ops)
			require.NoError(t, f.HDF5().InjectSyncFault(step, true))
			_, err = m.Commit("golden", "golden")
			require.Error(t, err)
			closeAll() // the crashed file does not close cleanly: nothing more is written

			// Before any repair: what another program sees.
			out, err := exec.Command("/usr/bin/python3", "-c", `
import sys, h5py
vs = h5py.File(sys.argv[1], "r")["_version_data/versions"]
print(" ".join(sorted(k for k in vs if k != "__first_version__" and bool(vs[k].attrs["committed"]))))`, file).CombinedOutput()
			require.NoError(t, err, "%s", out)
			seen := strings.TrimSpace(string(out))
			require.Contains(t, []string{"r1", "golden r1"}, seen)
			marker, err := os.ReadFile(filepath.Join(stagedir.Of(file), "golden", committingFile))
			require.NoError(t, err, "the commit's marker outlives the crash")
			require.Equal(t, "golden", string(marker))

			_, err = h5.Recover(file)
			require.NoError(t, err)
			has, err := hasVersion(file, "golden")
			require.NoError(t, err)
			if seen == "golden r1" || step == "apply" || step == "async" || step == "remove" {
				require.True(t, has, "past the commit point the version survives")
			}
			if has {
				require.NoError(t, conform.StageGolden(file, e))
			}
			findings, err := fsck.Check(file)
			require.NoError(t, err)
			require.Empty(t, findings, fsck.Summary(findings))
			saved, err := stagedir.List(file)
			require.NoError(t, err)
			require.Len(t, saved, 1, "the stage is kept")
			require.Equal(t, "golden", saved[0].Committing)

			// The next mount removes a stage whose version went through and serves the others,
			// which then commit as versioned-hdf5 would.
			_, m2, close2 := openCrashable(t, file, 32<<20)
			saved, err = stagedir.List(file)
			require.NoError(t, err)
			if has {
				require.Nil(t, m2.Get("golden"))
				require.Empty(t, saved, "the committed stage's files are removed")
				return
			}
			require.NotNil(t, m2.Get("golden"), "a stage whose commit did not go through is kept")
			require.Len(t, saved, 1)
			require.NoFileExists(t, filepath.Join(stagedir.Of(file), "golden", committingFile))
			_, err = m2.Commit("golden", "golden")
			require.NoError(t, err)
			require.NoError(t, close2())
			require.NoError(t, conform.StageGolden(file, e))
		})
	}
}

// hasVersion reports whether file has a committed version called name.
func hasVersion(file, name string) (bool, error) {
	f, err := versions.Open(file)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, ok, err := f.Version(name)
	return ok, err
}

// TestRecreate: a dataset deleted in a stage and created again takes the dtype, chunks,
// fill value and filters versioned-hdf5 fixed for its path (and the base's other axes),
// is kept across a remount, and commits as a new dataset of the same data group, as
// versioned-hdf5 writes a dataset deleted and created again in one version.
func TestRecreate(t *testing.T) {
	file := fixture.Copy(t, "../tests/testdata/fixtures/grid_2d_gzip.h5")
	f, m, closeAll := open(t, file, 32<<20)
	base, err := f.Dataset(versions.VersionsGroup + "/r5/temp")
	require.NoError(t, err)
	want := make([]byte, base.Size())
	_, err = base.ReadAt(want, 0)
	require.NoError(t, err)
	want[0] ^= 0xff // one element differs from the base's: one chunk is new

	st, err := m.Create("s")
	require.NoError(t, err)
	require.NoError(t, st.Unlink("temp"))
	d, err := st.Create("temp")
	require.NoError(t, err)
	spec, err := h5json.Marshal(d.Spec())
	require.NoError(t, err)
	require.JSONEq(t, `{"dtype": "<f8", "shape": [0, 37], "chunks": [8, 10], "fillvalue": 0.5, "compression": "gzip", "compression_opts": 4, "shuffle": true}`, string(spec))

	// A spec at that path: fields left out are the path's, given ones must agree.
	const give = `give {"dtype":"<f8","shape":[0,37],"chunks":[8,10],"fillvalue":0.5,"compression":"gzip","compression_opts":4,"shuffle":true}, or leave those fields out`
	for _, c := range []struct {
		spec string
		want string // in the error; "" for none
	}{
		{`{}`, ""},
		{string(spec), ""},
		{`{"dtype": "<f8", "shape": [0, 37], "chunks": [8, 10], "fillvalue": 0.5, "compression": "gzip", "shuffle": true}`, ""},
		{`{"fillvalue": 0}`, `fillvalue 0 (the path's is 0.5); ` + give},
		{`{"dtype": "<f4", "chunks": [4, 10]}`, `dtype <f4 (the path's is <f8), chunks [4 10] (the path's is [8 10]); ` + give},
		{`{"compression": null}`, `filters none (the path's is gzip 4+shuffle); ` + give},
		{`{"shape": [0, 37], "compression": "lzf", "shuffle": true}`, `filters lzf+shuffle (the path's is gzip 4+shuffle)`},
		{`{"fillvalue": 0.5, "shape": [2, 37]}`, ""},
	} {
		t.Run(c.spec, func(t *testing.T) {
			err := st.SetSpec("temp", []byte(c.spec))
			if c.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalid)
			require.Contains(t, err.Error(), c.want)
		})
	}
	require.Equal(t, int64(2*37*8), d.Size(), "the last spec's shape")
	_, err = d.WriteAt(want, 0)
	require.NoError(t, err)
	require.NoError(t, st.Sync(d))

	closeAll() // kept on disk, and served again
	f, m, closeAll = open(t, file, 32<<20)
	res, err := m.Commit("s", "s")
	require.NoError(t, err)
	require.Equal(t, "r5", res.Base)
	require.Equal(t, 1, res.Written, "one new chunk; the rest are the base's slots")
	got, err := f.Dataset(versions.VersionsGroup + "/s/temp")
	require.NoError(t, err)
	require.Equal(t, base.Type, got.Type)
	require.Equal(t, base.Shape, got.Shape)
	require.Equal(t, base.Chunks, got.Chunks)
	require.Equal(t, base.Fill, got.Fill)
	require.Equal(t, base.Filters, got.Filters)
	require.Equal(t, base.RawData, got.RawData)
	data := make([]byte, got.Size())
	_, err = got.ReadAt(data, 0)
	require.NoError(t, err)
	require.Equal(t, want, data)
	closeAll()
	findings, err := fsck.Check(file)
	require.NoError(t, err)
	require.Empty(t, findings, fsck.Summary(findings))
}
