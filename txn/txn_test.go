package txn_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/txn"
)

// The change every test makes to a copy of basic_1d.h5: the body creates /txn_body and
// marks it, the publish names it on the root (as a commit's current_version names its
// group) and unlinks /_version_data/versions/__first_version__'s sibling /txn_gone.
const (
	bodyGroup = "/txn_body"
	gone      = "/txn_gone"
)

func copyFixture(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixture.Dir(), "basic_1d.h5"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "f.h5")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	// The object the publish unlinks, made durable first.
	f, err := h5.OpenRW(path)
	require.NoError(t, err)
	require.NoError(t, f.CreateGroup(gone))
	require.NoError(t, f.FlushSync())
	require.NoError(t, f.Close())
	return path
}

func change(h *h5.File, inPlace bool, undo string, failIn string) txn.Change {
	fail := func(where string) error {
		if where == failIn {
			return errors.New("injected failure in the " + where)
		}
		return nil
	}
	return txn.Change{
		Body: func() error {
			if err := h.CreateGroup(bodyGroup); err != nil {
				return err
			}
			if err := h.SetAttrString(bodyGroup, "state", "complete"); err != nil {
				return err
			}
			return fail("body")
		},
		Publish: func() error {
			if err := h.SetAttrString("/", "txn_current", bodyGroup); err != nil {
				return err
			}
			if err := h.Unlink(gone); err != nil {
				return err
			}
			return fail("publish")
		},
		InPlace: inPlace,
		Undo:    undo,
	}
}

// state reads the file as a program that knows nothing of the change would: "old",
// "new", or what is inconsistent about it.
func state(t *testing.T, path string) string {
	t.Helper()
	f, err := h5.Open(path)
	require.NoError(t, err)
	defer f.Close()
	cur, named, err := f.Attr("/", "txn_current")
	require.NoError(t, err)
	body, err := f.Kind(bodyGroup)
	require.NoError(t, err)
	g, err := f.Kind(gone)
	require.NoError(t, err)
	switch {
	case !named && body == h5.KindMissing && g == h5.KindGroup:
		return "old"
	case named && cur.Value == bodyGroup && body == h5.KindGroup && g == h5.KindMissing:
		a, ok, err := f.Attr(bodyGroup, "state")
		require.NoError(t, err)
		if !ok || a.Value != "complete" {
			return "published with its body incomplete"
		}
		return "new"
	case !named && body == h5.KindGroup && g == h5.KindGroup:
		return "body only"
	}
	return "half published"
}

// unrecovered is the state of path as a program that does not know the journal beside it
// sees it: a copy of the file alone.
func unrecovered(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	other := filepath.Join(t.TempDir(), "other.h5")
	require.NoError(t, os.WriteFile(other, b, 0o644))
	return state(t, other)
}

// TestRunCrashes runs the change with a kill or a failure at every step of its sync,
// guarded and not, and checks the file before recovery (as the kill left it, to a program
// that does not know the journal: old, new, or the body alone, never the publish without
// its body) and after: the old state or the new one, never a mixture.
func TestRunCrashes(t *testing.T) {
	steps := []string{"tail", "fsync", "journal", "jsync", "dirsync", "apply", "bsync", "publish", "async", "remove"}
	for _, inPlace := range []bool{false, true} {
		for _, crash := range []bool{false, true} {
			for _, step := range append(steps, "guard", "unguard") {
				if !inPlace && (step == "guard" || step == "unguard") {
					continue
				}
				name := map[bool]string{false: "plain", true: "guarded"}[inPlace] + "/" + step + map[bool]string{false: " fails", true: " killed"}[crash]
				t.Run(name, func(t *testing.T) {
					path := copyFixture(t)
					h, err := h5.OpenRW(path)
					require.NoError(t, err)
					require.NoError(t, h.InjectSyncFault(step, crash))
					runErr := txn.Run(h, change(h, inPlace, "changed", ""))
					closeErr := h.Close()
					if crash {
						require.Error(t, runErr, "every step of the change's sync is reached")
					}
					if runErr == nil {
						require.NoError(t, closeErr)
						require.Equal(t, "new", state(t, path), "a change that returned success is durable")
						return
					}
					require.ErrorIs(t, runErr, h5.ErrStopped, "a failed sync stops the file")
					switch {
					case inPlace && crash && step == "apply":
						require.True(t, h5.GuardMarked(path), "an in-place change is guarded while it applies")
					case !inPlace && crash && step == "publish":
						require.Equal(t, "body only", unrecovered(t, path), "the body is durable before the publish is applied")
					}
					if !h5.GuardMarked(path) { // a guarded file is no HDF5 file to other programs
						// The body may be applied alone: objects no reader reaches.
						require.Contains(t, []string{"old", "body only", "new"}, unrecovered(t, path), "before recovery")
					}
					_, err = h5.Recover(path)
					require.NoError(t, err)
					require.Contains(t, []string{"old", "new"}, state(t, path), "after recovery")
				})
			}
		}
	}
}

// TestRunFailures: a failure in the body or the publish cancels every write with Undo
// (the file as it was, the error saying so), and leaves the body for the next sync
// without it.
func TestRunFailures(t *testing.T) {
	for _, tc := range []struct {
		failIn, undo, after string
	}{
		{"body", "changed", "old"},
		{"publish", "changed", "old"},
		{"body", "", "body only"},
	} {
		t.Run(tc.failIn+"/undo="+tc.undo, func(t *testing.T) {
			path := copyFixture(t)
			h, err := h5.OpenRW(path)
			require.NoError(t, err)
			err = txn.Run(h, change(h, true, tc.undo, tc.failIn))
			require.ErrorContains(t, err, "injected failure in the "+tc.failIn)
			if tc.undo != "" {
				require.ErrorContains(t, err, "; nothing "+tc.undo)
				require.ErrorIs(t, h.Stopped(), h5.ErrStopped, "a cancelled file takes no more writes")
				h.Close()
			} else {
				require.NoError(t, h.Stopped())
				require.NoError(t, h.FlushSync(), "the next sync takes the body")
				require.NoError(t, h.Close())
			}
			require.Equal(t, tc.after, state(t, path))
		})
	}
}

// TestRunStopped: a file stopped by an earlier failure is refused before anything runs.
func TestRunStopped(t *testing.T) {
	path := copyFixture(t)
	h, err := h5.OpenRW(path)
	require.NoError(t, err)
	require.NoError(t, h.Cancel())
	ran := false
	err = txn.Run(h, txn.Change{Publish: func() error { ran = true; return nil }})
	require.ErrorIs(t, err, h5.ErrStopped)
	require.False(t, ran)
	h.Close()
	require.Equal(t, "old", state(t, path))
}
