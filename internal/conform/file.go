package conform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/hashtable"
	"github.com/vh5fs/vh5fs/versions"
)

// Files compares two whole versioned files, field by field: current_version, the version
// groups, each version's tree (Tree: attributes, prev_version among them, and data), each
// dataset's data and chunk mappings (Read, Diff), and per data group raw_data's and
// hash_table's shapes, largest_index, every hash row and every slot it names (whole,
// padding included). Timestamps of versions are compared too, except those of the
// versions named in fresh (committed by the test, at another time). nil if they agree.
func Files(got, want string, fresh ...string) error {
	g, err := readFile(got)
	if err != nil {
		return fmt.Errorf("%s: %w", got, err)
	}
	w, err := readFile(want)
	if err != nil {
		return fmt.Errorf("%s: %w", want, err)
	}
	switch {
	case g.current != w.current:
		return fmt.Errorf("current_version %q, want %q", g.current, w.current)
	case !slices.Equal(g.versions, w.versions):
		return fmt.Errorf("versions %v, want %v", g.versions, w.versions)
	}
	for i, v := range g.versions {
		if g.stamps[i] != w.stamps[i] && !slices.Contains(fresh, v) {
			return fmt.Errorf("version %s: timestamp %s, want %s", v, g.stamps[i], w.stamps[i])
		}
	}
	switch {
	case !slices.Equal(g.groups, w.groups):
		return fmt.Errorf("data groups:\n got %v\nwant %v", g.groups, w.groups)
	}
	for i, v := range g.versions {
		if g.trees[i] != w.trees[i] {
			return fmt.Errorf("version %s: the tree differs:\n got %s\nwant %s", v, g.trees[i], w.trees[i])
		}
		for _, ds := range g.datasets[i] {
			a, err := Read(got, v, ds, math.MaxInt64)
			if err != nil {
				return err
			}
			b, err := Read(want, v, ds, math.MaxInt64)
			if err != nil {
				return err
			}
			if d := Diff(a, b); d != "" {
				return fmt.Errorf("version %s, %s: %s", v, ds, d)
			}
		}
	}
	for i, grp := range g.groups {
		if !slices.EqualFunc(g.rows[i], w.rows[i], bytes.Equal) {
			return fmt.Errorf("data group %s: hash rows differ:\n got %x\nwant %x", grp, g.rows[i], w.rows[i])
		}
		for j := range g.slots[i] {
			if !bytes.Equal(g.slots[i][j], w.slots[i][j]) {
				return fmt.Errorf("data group %s: the slot of hash row %d differs", grp, j)
			}
		}
	}
	return nil
}

type fileState struct {
	current  string
	versions []string   // every version group but __first_version__, by name
	stamps   []string   // their timestamps
	trees    []string   // Tree of each
	datasets [][]string // dataset paths of each
	groups   []string   // "path raw_data SHAPE hash_table SHAPE largest_index N"
	rows     [][][]byte // per data group, its hash rows
	slots    [][][]byte // and the slot each names
}

func readFile(file string) (*fileState, error) {
	f, err := versions.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := f.HDF5()
	s := &fileState{}
	if s.current, _, err = versions.Current(h); err != nil {
		return nil, err
	}
	members, err := h.Members(versions.VersionsGroup)
	if err != nil {
		return nil, err
	}
	for _, m := range members {
		if m.Name == versions.FirstVersion {
			continue
		}
		s.versions = append(s.versions, m.Name)
		ts, _, err := h.Attr(versions.VersionGroup(m.Name), versions.AttrTimestamp)
		if err != nil {
			return nil, err
		}
		stamp, _ := ts.Value.(string)
		s.stamps = append(s.stamps, stamp)
		tree, err := Tree(file, m.Name)
		if err != nil {
			return nil, err
		}
		s.trees = append(s.trees, tree)
		var ds []string
		var walk func(dir, rel string) error
		walk = func(dir, rel string) error {
			ents, err := f.List(dir)
			if err != nil {
				return err
			}
			for _, e := range ents {
				if e.IsGroup {
					if err := walk(dir+"/"+e.Name, rel+e.Name+"/"); err != nil {
						return err
					}
					continue
				}
				ds = append(ds, rel+e.Name)
			}
			return nil
		}
		if err := walk(versions.VersionGroup(m.Name), ""); err != nil {
			return nil, err
		}
		s.datasets = append(s.datasets, ds)
	}
	var walk func(dir, rel string) error
	walk = func(dir, rel string) error {
		ms, err := h.Members(dir)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.Kind != h5.KindGroup || (dir == versions.DataRoot && m.Name == "versions") {
				continue
			}
			k, err := h.Kind(versions.RawDataIn(dir + "/" + m.Name))
			if err != nil {
				return err
			}
			if k == h5.KindMissing {
				if err := walk(dir+"/"+m.Name, rel+m.Name+"/"); err != nil {
					return err
				}
				continue
			}
			if err := s.readGroup(h, dir+"/"+m.Name, rel+m.Name); err != nil {
				return fmt.Errorf("data group %s: %w", rel+m.Name, err)
			}
		}
		return nil
	}
	return s, walk(versions.DataRoot, "")
}

func (s *fileState) readGroup(h *h5.File, dir, rel string) error {
	raw, err := h.OpenDataset(versions.RawDataIn(dir))
	if err != nil {
		return err
	}
	defer raw.Close()
	ht, err := h.OpenDataset(versions.HashTableIn(dir))
	if err != nil {
		return err
	}
	defer ht.Close()
	largest, _, err := hashtable.Largest(h, versions.HashTableIn(dir))
	if err != nil {
		return err
	}
	ri := raw.Info()
	s.groups = append(s.groups, fmt.Sprintf("%s raw_data %v hash_table %v largest_index %d", rel, ri.Shape, ht.Info().Shape, largest))
	var rows, slots [][]byte
	chunks := ri.Chunks
	err = hashtable.Scan(ht, largest, func(_ int64, r hashtable.Row) error {
		rows = append(rows, r.Append(nil))
		start := make([]int64, len(chunks))
		start[0] = r.Start
		var slot []byte
		if start[0]+chunks[0] <= ri.Shape[0] {
			var err error
			if slot, err = readSlot(raw, start, chunks); err != nil {
				return err
			}
		}
		slots = append(slots, slot)
		return nil
	})
	if err != nil {
		return err
	}
	s.rows = append(s.rows, rows)
	s.slots = append(s.slots, slots)
	return nil
}

// readSlot reads the whole raw_data slot at start: its bytes, or for variable-length
// strings (whose stored bytes are heap references) its values as a JSON array.
func readSlot(raw *h5.Dataset, start, chunks []int64) ([]byte, error) {
	if raw.Info().Type.VlenString {
		vals, err := raw.ReadStrings(start, chunks)
		if err != nil {
			return nil, err
		}
		return json.Marshal(vals)
	}
	n := int64(raw.Info().Type.Size)
	for _, c := range chunks {
		n *= c
	}
	slot := make([]byte, n)
	if err := raw.ReadBox(start, chunks, chunks, make([]int64, len(chunks)), slot); err != nil {
		return nil, err
	}
	return slot, nil
}
