package stagedir

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrInUse marks a history edit refused because stages record what it would change: a
// stage records the raw_data slots of its base's chunks, which deletions, reclaims and
// rewrites move, and names its base, which a rename or deletion takes away.
var ErrInUse = errors.New("stages are kept beside the file")

// Edit is a history edit, as Check weighs it against the stages.
type Edit struct {
	Done     string   // what the refusal says is left undone: "deleted", "renamed"
	Moves    string   // why any stage is in the way ("raw_data slots a deletion moves"); "": only stages based on Versions are
	Versions []string // the versions the edit removes or renames
	Branches []string // the branches the edit deletes: a stage that commits on one is in the way
	Served   []string // stages a mount serves that may not be saved yet (in the way as any stage is)
}

// The edits that weigh the stages: what each leaves undone when refused, and what of a
// stage it would invalidate.

// Deletion deletes versions: every stage records raw_data slots it moves, and a stage
// based on a deleted version loses its base.
func Deletion(versions []string) Edit {
	return Edit{Done: "deleted", Moves: "raw_data slots a deletion moves", Versions: versions}
}

// Renaming renames version: a stage based on it would lose its base's name.
func Renaming(version string) Edit { return Edit{Done: "renamed", Versions: []string{version}} }

// Reclaim compacts the chunks deletions left pending (served: a mount's stages).
func Reclaim(served []string) Edit {
	return Edit{Done: "reclaimed", Moves: "raw_data slots the reclaim moves", Served: served}
}

// Rewriting replaces a dataset's storage in every version (modify).
func Rewriting() Edit {
	return Edit{Done: "modified", Moves: "chunks of the storage a rewrite replaces"}
}

// BranchDeletion deletes branch: a stage that commits on it would have nowhere to commit.
func BranchDeletion(branch string) Edit { return Edit{Done: "deleted", Branches: []string{branch}} }

// InUseError is Check's refusal: the stages in the way of an edit of File.
type InUseError struct {
	File, Dir string
	Edit      Edit
	Stages    []Summary // in the way, the first one named in the message
}

func (e *InUseError) Error() string {
	them := "the stage"
	if len(e.Stages) > 1 {
		them = "the stages"
	}
	return fmt.Sprintf("%s: %s: commit or remove %s first; nothing %s; the %v (%s)",
		e.File, e.Reason(), them, e.Edit.Done, ErrInUse, strings.Join(e.Names(), ", "))
}

// Reason says why the first stage is in the way: "stage s (DIR) is based on version v4".
func (e *InUseError) Reason() string {
	s := e.Stages[0]
	why := "records " + e.Edit.Moves
	switch {
	case slices.Contains(e.Edit.Versions, s.Base):
		why = "is based on version " + s.Base
	case s.Branch != "" && slices.Contains(e.Edit.Branches, s.Branch):
		why = "commits on branch " + s.Branch
	}
	return fmt.Sprintf("stage %s (%s) %s", s.Name, e.Dir, why)
}

// Names names the stages in the way.
func (e *InUseError) Names() []string {
	names := make([]string, len(e.Stages))
	for i, s := range e.Stages {
		names[i] = s.Name
	}
	return names
}

func (e *InUseError) Unwrap() error { return ErrInUse }

// Check is the one check of the stages kept beside file (and those e.Served) against an
// edit: an *InUseError (ErrInUse) naming the stages in its way, nil if none is.
func Check(file string, e Edit) error {
	saved, err := List(file)
	if err != nil {
		return fmt.Errorf("%s: reading its stages (%s): %w", file, Of(file), err)
	}
	for _, name := range e.Served {
		if !slices.ContainsFunc(saved, func(s Summary) bool { return s.Name == name }) {
			saved = append(saved, Summary{Name: name})
		}
	}
	var in []Summary
	for _, s := range saved {
		if e.Moves != "" || slices.Contains(e.Versions, s.Base) || s.Branch != "" && slices.Contains(e.Branches, s.Branch) {
			in = append(in, s)
		}
	}
	if len(in) == 0 {
		return nil
	}
	// The first named is one based on the edited versions, if any: the likelier surprise.
	slices.SortStableFunc(in, func(a, b Summary) int {
		ab, bb := slices.Contains(e.Versions, a.Base), slices.Contains(e.Versions, b.Base)
		switch {
		case ab == bb:
			return strings.Compare(a.Name, b.Name)
		case ab:
			return -1
		}
		return 1
	})
	return &InUseError{File: file, Dir: Of(file), Edit: e, Stages: in}
}
