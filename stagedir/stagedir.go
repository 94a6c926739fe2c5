// Package stagedir knows the stages kept beside an HDF5 file (.FILE.vh5fs-stages/NAME/):
// where they are and what each holds, read without opening the file or loading a stage.
// History edits that must not change the file under a stage (delete, reclaim, rename,
// modify) ask it through Check, the one check of stages against an edit; package stage,
// which writes the stages, keeps them there.
package stagedir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// TreeFile is a stage's changes to its base's tree, in its directory; CommittingFile,
// there while a commit of the stage runs, names the version the commit takes.
const (
	TreeFile       = "stage.json"
	CommittingFile = "committing"
)

// Of is where the stages of the HDF5 file at file are kept.
func Of(file string) string {
	return filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".vh5fs-stages")
}

// Summary describes a stage kept on disk, as `vh5fs ls --stages` shows it.
type Summary struct {
	Name, Base string
	Branch     string // the branch the stage commits on, "" for none
	// New are datasets created in the stage; Changed datasets of the base whose staged
	// data is saved; Removed paths of the base removed (with everything below); Groups
	// groups created; Attrs objects whose attributes changed ("" is the stage's root).
	New, Changed, Removed, Groups, Attrs []string
	// Committing names the version a commit of the stage was taking when its mount ended
	// (crashed): the next read-write mount removes the stage if that version exists on
	// Base, and serves it again if not.
	Committing string
}

// tree is what List reads of a stage's TreeFile (package stage writes all of it).
type tree struct {
	Base     string   `json:"base"`
	Branch   string   `json:"branch"`
	Removed  []string `json:"removed"`
	Groups   []string `json:"groups"`
	Datasets map[string]struct {
		Spec    json.RawMessage `json:"spec"` // present: created in the stage
		Changed bool            `json:"changed"`
	} `json:"datasets"`
	Attrs map[string]map[string]json.RawMessage `json:"attrs"`
}

// List lists the stages kept beside the HDF5 file at file, as last saved (a mount that
// is running saves a dataset's data at fsync and at unmount).
func List(file string) ([]Summary, error) {
	dir := Of(file)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Summary
	for _, e := range ents {
		if !e.IsDir() || e.Name()[0] == '.' {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), TreeFile))
		if err != nil {
			return nil, fmt.Errorf("stage %s: %w", e.Name(), err)
		}
		var t tree
		if err := json.Unmarshal(b, &t); err != nil {
			return nil, fmt.Errorf("stage %s: %s: %w", e.Name(), TreeFile, err)
		}
		s := Summary{Name: e.Name(), Base: t.Base, Branch: t.Branch, Removed: t.Removed, Groups: t.Groups}
		if b, err := os.ReadFile(filepath.Join(dir, e.Name(), CommittingFile)); err == nil {
			s.Committing = string(b)
		}
		for p, d := range t.Datasets {
			switch {
			case len(d.Spec) > 0 && string(d.Spec) != "null":
				s.New = append(s.New, p)
			case d.Changed:
				s.Changed = append(s.Changed, p)
			}
		}
		for p, a := range t.Attrs {
			if len(a) > 0 {
				s.Attrs = append(s.Attrs, p)
			}
		}
		sort.Strings(s.New)
		sort.Strings(s.Changed)
		sort.Strings(s.Attrs)
		out = append(out, s)
	}
	return out, nil
}
