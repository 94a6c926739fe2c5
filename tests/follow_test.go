package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// TestFollowHead: in a read-write mount of nested (current version "dropped"), handles
// opened through current/ follow the head. Two of them on two datasets, written and
// closed, make two versions in a chain whose last holds both changes; two on the same
// dataset make siblings, with a log line naming both versions; a handle on an older
// version still branches off it. Checked through the mount and with h5py after unmount.
func TestFollowHead(t *testing.T) {
	file := fixture.Copy(t, "testdata/fixtures/nested.h5")
	m := mount(t, file, "rw")
	const level, phase, flags = "sensors/south/level", "phase", "sensors/north/flags"
	p := func(parts ...string) string { return filepath.Join(append([]string{m.Dir}, parts...)...) }
	require.Equal(t, "dropped", currentVersion(t, m.Dir))

	// openWrite opens path for writing and overwrites its first 4 bytes with b; it returns
	// the file and the content it will have.
	openWrite := func(path string, b byte) (*os.File, []byte) {
		t.Helper()
		want, err := os.ReadFile(path)
		require.NoError(t, err)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte{b, b, b, b}, 0)
		require.NoError(t, err)
		copy(want, []byte{b, b, b, b})
		return f, want
	}
	read := func(path string) []byte {
		t.Helper()
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		return b
	}
	// want[version][dataset] is the content a version must hold; prev its prev_version.
	want := map[string]map[string][]byte{}
	prev := map[string]string{}
	commitAs := func(f *os.File, parent string) string {
		t.Helper()
		before := currentVersion(t, m.Dir)
		require.NoError(t, f.Close())
		v := currentVersion(t, m.Dir)
		require.NotEqual(t, before, v, "close made a version")
		prev[v] = parent
		want[v] = map[string][]byte{}
		for _, ds := range []string{level, phase, flags} {
			want[v][ds] = read(p("versions", v, ds))
		}
		return v
	}

	// Both opened on "dropped" before either commits.
	a, wantPhase := openWrite(p("current", phase), 1)
	b, wantLevel := openWrite(p("current", level), 2)
	va := commitAs(a, "dropped")
	vb := commitAs(b, va)
	require.Equal(t, wantPhase, read(p("current", phase)), "current holds a's change")
	require.Equal(t, wantLevel, read(p("current", level)), "current holds b's change")
	require.Equal(t, wantPhase, want[vb][phase])
	require.Equal(t, wantLevel, want[vb][level])

	// Two handles through current/ on the same dataset: the second sees the head changed
	// it and makes a sibling off its own base, with its own data.
	c, _ := openWrite(p("current", level), 3)
	d, wantD := openWrite(p("current", level), 4)
	vc := commitAs(c, vb)
	vd := commitAs(d, vb)
	require.Equal(t, wantD, want[vd][level])
	require.Equal(t, wantPhase, want[vd][phase], "the sibling still carries a's change")

	// A handle on an older version branches off it, although the head left flags as that
	// version has it.
	o, wantFlags := openWrite(p("versions", "added", flags), 1)
	vo := commitAs(o, "added")
	require.Equal(t, wantFlags, want[vo][flags])
	require.Equal(t, read(p("versions", "added", phase)), want[vo][phase])

	m.unmount(t)
	logs := m.stderr.String()
	var warn []string
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "committed a sibling") {
			warn = append(warn, line)
		}
	}
	require.Len(t, warn, 1, "one warning, for d: %s", logs)
	require.Contains(t, warn[0], "version="+vd)
	require.Contains(t, warn[0], "base="+vb)
	require.Contains(t, warn[0], "current="+vc)

	// h5py reads every version made here with the parent and data seen through the mount.
	out, err := exec.Command(python(t), "py/version_digests.py", file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if f[0] == "current" {
			require.Equal(t, vo, f[1], "current_version")
			continue
		}
		w, ok := want[f[0]]
		if !ok || w[f[2]] == nil {
			continue
		}
		require.Equal(t, prev[f[0]], f[1], "prev_version of %s", f[0])
		sum := sha256.Sum256(w[f[2]])
		require.Equal(t, hex.EncodeToString(sum[:]), f[3], "h5py's read of %s/%s", f[0], f[2])
		seen++
	}
	require.Equal(t, 3*len(want), seen, "h5py saw every version made: %s", out)
	checkFile(t, file)
}
