package stagedir_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/stagedir"
)

func TestList(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data.h5")
	require.Equal(t, filepath.Join(filepath.Dir(file), ".data.h5.vh5fs-stages"), stagedir.Of(file))
	none, err := stagedir.List(file)
	require.NoError(t, err)
	require.Empty(t, none, "no directory: no stages")

	write := func(name, tree string, committing string) {
		dir := filepath.Join(stagedir.Of(file), name)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, stagedir.TreeFile), []byte(tree), 0o644))
		if committing != "" {
			require.NoError(t, os.WriteFile(filepath.Join(dir, stagedir.CommittingFile), []byte(committing), 0o644))
		}
	}
	write("a", `{"base":"v1","removed":["old"],"groups":["g"],"datasets":{
		"g/new":{"spec":{"dtype":"<i8"},"data":true,"changed":true},
		"x":{"data":true,"changed":true},
		"y":{"data":false,"changed":false}},
		"attrs":{"":{"k":1},"x":{}}}`, "v9")
	write("b", `{"base":"v2","removed":null,"groups":null,"datasets":{},"attrs":null}`, "")
	require.NoError(t, os.MkdirAll(filepath.Join(stagedir.Of(file), ".tmp"), 0o755)) // not a stage

	got, err := stagedir.List(file)
	require.NoError(t, err)
	require.Equal(t, []stagedir.Summary{
		{Name: "a", Base: "v1", New: []string{"g/new"}, Changed: []string{"x"}, Removed: []string{"old"},
			Groups: []string{"g"}, Attrs: []string{""}, Committing: "v9"},
		{Name: "b", Base: "v2"},
	}, got)

	write("c", `{"base":`, "")
	_, err = stagedir.List(file)
	require.ErrorContains(t, err, "stage c: stage.json")
}

// TestCheckBranchDeletion: deleting a branch is refused only by a stage that commits on
// it, which the refusal names as such.
func TestCheckBranchDeletion(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data.h5")
	for name, tree := range map[string]string{
		"plain": `{"base":"v1","datasets":{}}`,
		"ondev": `{"base":"v2","branch":"dev","datasets":{}}`,
	} {
		dir := filepath.Join(stagedir.Of(file), name)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, stagedir.TreeFile), []byte(tree), 0o644))
	}
	require.NoError(t, stagedir.Check(file, stagedir.BranchDeletion("other")))
	err := stagedir.Check(file, stagedir.BranchDeletion("dev"))
	require.ErrorIs(t, err, stagedir.ErrInUse)
	var in *stagedir.InUseError
	require.ErrorAs(t, err, &in)
	require.Equal(t, []string{"ondev"}, in.Names())
	require.ErrorContains(t, err, "stage ondev ("+stagedir.Of(file)+") commits on branch dev: commit or remove the stage first; nothing deleted")
}
