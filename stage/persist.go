package stage

import (
	"bufio"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/vh5fs/vh5fs/chunkplan"
	"github.com/vh5fs/vh5fs/internal/durable"
	"github.com/vh5fs/vh5fs/staged"
	"github.com/vh5fs/vh5fs/stagedir"
	"github.com/vh5fs/vh5fs/versions"
	"github.com/vh5fs/vh5fs/writefile"
)

// savedTree is stage.json: a stage's changes to its base's tree.
type savedTree struct {
	Base     string                                `json:"base"`
	Branch   string                                `json:"branch,omitempty"` // commits on this branch
	Removed  []string                              `json:"removed"`
	Groups   []string                              `json:"groups"`
	Datasets map[string]savedDataset               `json:"datasets"`
	Attrs    map[string]map[string]json.RawMessage `json:"attrs"` // null: removed
}

type savedDataset struct {
	Spec    *Spec `json:"spec,omitempty"` // created in the stage
	Data    bool  `json:"data"`           // its data file holds its staged data
	Changed bool  `json:"changed"`        // differs from the base's as saved
}

// savedData is the header line of a dataset's data file; the staged chunks follow, each
// ChunkBytes long, in staging order.
type savedData struct {
	Shape  []int64   `json:"shape"`
	Base   [][]int64 `json:"base"`   // grid index then raw_data row, per chunk mapped to the base
	Staged [][]int64 `json:"staged"` // grid indices of the chunks that follow
	// Origins: how each of them was staged (staged.Origin), which orders the commit's new
	// chunks; absent in files saved before it was kept.
	Origins []staged.Origin `json:"origins,omitempty"`
	// Text: a string dataset's, whose text follows instead of chunks (Shape is its shape
	// but for axis 0, which its lines set).
	Text bool `json:"text,omitempty"`
}

func (s *Stage) dir() string { return filepath.Join(s.m.dir, s.name) }

// dataFile is where the dataset at p keeps its staged data: named by a digest of the path,
// which may be longer than a file name can be.
func (s *Stage) dataFile(p string) string {
	sum := sha256.Sum256([]byte(p))
	return filepath.Join(s.dir(), hex.EncodeToString(sum[:12])+".data")
}

// saveTree writes stage.json. Called with s.mu held.
func (s *Stage) saveTree() error {
	t := savedTree{Base: s.base, Branch: s.branch, Datasets: map[string]savedDataset{}, Attrs: s.attrs}
	for p := range s.removed {
		t.Removed = append(t.Removed, p)
	}
	for p := range s.groups {
		t.Groups = append(t.Groups, p)
	}
	sort.Strings(t.Removed)
	sort.Strings(t.Groups)
	for p, d := range s.datasets {
		if d.Created() || d.saved {
			t.Datasets[p] = savedDataset{Spec: d.Spec(), Data: d.saved, Changed: d.restored || d.Created()}
		}
	}
	b, err := json.MarshalIndent(t, "", " ")
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(s.dir(), stagedir.TreeFile), func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// writeFile replaces path with what fill writes, durably (durable.WriteFile).
func writeFile(path string, fill func(w io.Writer) error) error {
	if err := durable.WriteFile(path, 0o600, fill); err != nil {
		return fmt.Errorf("saving the stage: %w", err)
	}
	return nil
}

// saveDataset writes d's data file and then the tree. Called with s.mu held.
func (s *Stage) saveDataset(d *Dataset) error {
	arr, release := d.Hold()
	defer release()
	if !d.changed() {
		return nil
	}
	if arr == nil {
		return s.saveText(d)
	}
	var hdr savedData
	hdr.Shape = arr.Shape()
	if err := arr.Each(func(g []int64, slab int32, off int64) error {
		if slab == chunkplan.BaseSlab {
			hdr.Base = append(hdr.Base, append(slices.Clone(g), off))
		}
		return nil
	}); err != nil {
		return err
	}
	chunks, err := arr.StagedChunks()
	if err != nil {
		return err
	}
	slices.SortFunc(chunks, func(a, b staged.StagedChunk) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, c := range chunks {
		hdr.Staged = append(hdr.Staged, c.Grid)
		hdr.Origins = append(hdr.Origins, c.Origin)
	}
	line, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	buf := make([]byte, arr.ChunkBytes())
	err = writeFile(s.dataFile(d.path), func(w io.Writer) error {
		if _, err := w.Write(append(line, '\n')); err != nil {
			return err
		}
		for _, c := range chunks {
			data, err := arr.StagedData(c, buf)
			if err != nil {
				return err
			}
			if _, err := w.Write(data); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.savedData(d)
}

// savedData records that d's data file holds its changes, in the tree.
func (s *Stage) savedData(d *Dataset) error {
	wasSaved, wasRestored := d.saved, d.restored
	d.saved, d.restored = true, true
	return s.changed(func() { d.saved, d.restored = wasSaved, wasRestored })
}

// saveText writes the data file of d, a string dataset held by the caller: a header,
// then its text. Called with s.mu held.
func (s *Stage) saveText(d *Dataset) error {
	line, err := json.Marshal(savedData{Shape: d.file().ShapeHeld(), Text: true})
	if err != nil {
		return err
	}
	err = writeFile(s.dataFile(d.path), func(w io.Writer) error {
		if _, err := w.Write(append(line, '\n')); err != nil {
			return err
		}
		_, err := w.Write(d.file().TextHeld())
		return err
	})
	if err != nil {
		return err
	}
	return s.savedData(d)
}

// saveAll saves every changed dataset's data. Called with s.mu held.
func (s *Stage) saveAll() error {
	var errs []error
	for _, d := range s.datasets {
		if err := s.saveDataset(d); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.path, err))
		}
	}
	return errors.Join(append(errs, s.saveTree())...)
}

// load reads the stage called name from disk.
func (m *Manager) load(name string) (*Stage, error) {
	s := newStage(m, name, "")
	b, err := os.ReadFile(filepath.Join(s.dir(), stagedir.TreeFile))
	if err != nil {
		return nil, err
	}
	var t savedTree
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("stage.json: %w", err)
	}
	if _, ok, err := m.f.Version(t.Base); err != nil {
		return nil, err
	} else if !ok {
		return nil, fmt.Errorf("its base version %q is not in the file", t.Base)
	}
	if err := m.checkCommitting(s, t.Base); err != nil {
		return nil, err
	}
	s.base, s.branch = t.Base, t.Branch
	for _, p := range t.Removed {
		s.removed[p] = true
	}
	for _, p := range t.Groups {
		s.groups[p] = true
	}
	for p, attrs := range t.Attrs {
		m := map[string]json.RawMessage{}
		for n, v := range attrs {
			if string(v) == "null" {
				v = nil
			}
			m[n] = v
		}
		s.attrs[p] = m
	}
	for p, sd := range t.Datasets {
		d, err := s.loadDataset(p, sd)
		if err != nil {
			s.discard()
			return nil, fmt.Errorf("dataset %s: %w", p, err)
		}
		s.datasets[p] = d
	}
	return s, nil
}

// committingFile (stagedir.CommittingFile), in a stage's directory, names the version the
// stage's commit takes: written
// once the commit has chosen the name, before it writes to the HDF5 file, and removed when
// the commit fails short of its sync. A stage found with it whose version exists on the
// stage's base was committed by a mount that ended (crashed) before removing the stage's
// files. It is not synced: after a machine crash it may be missing, and such a stage is
// kept (committing it again answers ErrExist; rm -r discards it).
const committingFile = stagedir.CommittingFile

// committedError is load's answer for a stage whose commit went through.
type committedError struct{ version string }

func (e committedError) Error() string { return "committed as version " + e.version }

// markCommitting records the name of the version s's commit takes (commit.Tree.Named).
func (s *Stage) markCommitting(name string) error {
	if err := os.WriteFile(filepath.Join(s.dir(), committingFile), []byte(name), 0o644); err != nil {
		return fmt.Errorf("stage %s: %w", s.name, err)
	}
	return nil
}

func (s *Stage) unmarkCommitting() {
	if err := os.Remove(filepath.Join(s.dir(), committingFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		slog.Error("stage's commit marker not removed", "stage", s.name, "err", err)
	}
}

// checkCommitting answers committedError when s, being loaded on base, was committed: its
// commit marker names a version whose prev_version is base. Otherwise the marker goes.
func (m *Manager) checkCommitting(s *Stage, base string) error {
	name, err := os.ReadFile(filepath.Join(s.dir(), committingFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	v, ok, err := m.f.Version(string(name))
	if err != nil {
		return err
	}
	if ok && (v.PrevVersion == base || v.PrevVersion == "" && base == versions.FirstVersion) {
		return committedError{v.Name}
	}
	s.unmarkCommitting()
	return nil
}

// loadDataset restores one dataset of a stage being loaded.
func (s *Stage) loadDataset(p string, sd savedDataset) (*Dataset, error) {
	var d *Dataset
	var err error
	if sd.Spec != nil {
		d, err = s.newDataset(p, *sd.Spec)
	} else {
		d, err = s.open(p)
		delete(s.datasets, p)
	}
	if err != nil || !sd.Data {
		return d, err
	}
	arr, release := d.Hold()
	var chunks []int64
	var isz int
	var fill []byte
	if arr != nil { // else text
		chunks, isz, fill = arr.Chunks(), arr.ItemSize(), arr.Fill()
	}
	release()
	f, err := os.Open(s.dataFile(p))
	if err != nil {
		d.Close()
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	line, err := r.ReadBytes('\n')
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("data file: %w", err)
	}
	var hdr savedData
	if err := json.Unmarshal(line, &hdr); err != nil {
		d.Close()
		return nil, fmt.Errorf("data file: %w", err)
	}
	if hdr.Text {
		buf, err := io.ReadAll(r)
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("data file: %w", err)
		}
		out := newDataset(p, d.file().RestoreText(buf, hdr.Shape), d.Spec())
		d.Close()
		out.restored, out.saved = sd.Changed, true
		return out, nil
	}
	restored, err := staged.New(hdr.Shape, chunks, isz, fill)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("data file: %w", err)
	}
	s.m.c.Adopt(restored)
	fail := func(err error) (*Dataset, error) {
		restored.Discard()
		d.Close()
		return nil, fmt.Errorf("data file: %w", err)
	}
	for _, b := range hdr.Base {
		if len(b) != len(chunks)+1 {
			return fail(fmt.Errorf("a base chunk of rank %d", len(b)-1))
		}
		if err := restored.MapBase(b[:len(chunks)], b[len(chunks)]); err != nil {
			return fail(err)
		}
	}
	buf := make([]byte, restored.ChunkBytes())
	for i, g := range hdr.Staged {
		if _, err := io.ReadFull(r, buf); err != nil {
			return fail(err)
		}
		var o staged.Origin
		if i < len(hdr.Origins) {
			o = hdr.Origins[i]
		}
		if err := restored.StageChunk(g, buf, o); err != nil {
			return fail(err)
		}
	}
	src := d.h.Load().Source()
	d.Close()
	out := newDataset(p, writefile.NewFile(restored, src), d.Spec())
	out.restored, out.saved = sd.Changed, true
	return out, nil
}
