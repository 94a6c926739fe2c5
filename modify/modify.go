// Package modify changes a versioned dataset's chunk shape, filters, dtype or fill value
// in every version that holds it, as versioned-hdf5's modify_metadata does (format
// specification section 9.3), with the same result: a new raw_data and hash_table holding
// every chunk of every version under the new storage, and new virtual datasets.
//
// What versioned-hdf5 writes, and so what File writes:
//
//   - the versions are visited in name order (every group of the versions group but
//     __first_version__, as HDF5 iterates them), and each one holding the dataset is
//     re-read whole and cut into chunks of the new shape;
//   - each version's chunks, in grid (C) order, are hashed and deduplicated against the
//     new hash table, first seen first stored: the new slots follow that order; chunks
//     holding only the fill value are stored too (the library writes whole arrays);
//   - each version gets a new virtual dataset mapping its chunks, with the new fill value.
//
// vh5fs keeps the dataset's user attributes in every version (versioned-hdf5 drops them);
// everything else of the file (other datasets, version groups and their attributes) is
// left as it is.
//
// Memory and cores: a version is read one band of new chunks at a time (the rows of one
// new chunk along axis 0), several bands ahead on every core, which cut, convert and hash
// them; the chunks are deduplicated in order, encoded on every core (shuffle, deflate)
// and stored with direct chunk writes. A band whose source chunks (raw_data slots), shape
// and position equal those of a band already done in an earlier version maps the same
// new slots without being read again, which is what rehashing it would find: the cost
// follows the chunks versions changed, not versions times chunks.
//
// Crash safety: the new raw_data and hash_table are built in a data group under
// /_version_data/__tmp__ (versioned-hdf5's own scratch name), the new virtual datasets
// beside it, already naming the dataset's raw_data path; that is the body of one
// transaction (package txn, whose crash contract it inherits). The publish then swaps links: each version's
// virtual dataset and the data group's raw_data and hash_table are replaced by the new
// ones, and the scratch group is removed. h5.File.FlushSync makes both durable through
// the redo journal: a crash leaves the old file, or, once the journal is complete, the new
// one after recovery (the next read-write open, vh5fs fsck --repair). The sync is guarded
// (h5.File.GuardSync): a crash inside the swap's apply leaves a file other programs refuse
// as not HDF5 until recovery, never one whose versions are half swapped. The space of the
// old objects stays in the file until vh5fs compact.
package modify

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/vh5fs/vh5fs/chunkplan"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/hashtable"
	"github.com/vh5fs/vh5fs/versions"
)

// Filter identifiers of the pipelines modify reads and writes.
const (
	filterDeflate = 1
	filterShuffle = 2
	filterLZF     = 32000
)

// scratch is where the new objects are built before the swap.
const scratch = versions.DataRoot + "/__tmp__"

// Options says what to change; the zero value of a field leaves it as it is.
type Options struct {
	Chunks []int64 // the new chunk shape, one entry per axis
	// Compression is "none", "gzip" or "lzf" ("" unchanged); GzipLevel goes with "gzip"
	// (h5py's default, 4, when negative).
	Compression string
	GzipLevel   int
	Shuffle     *bool
	DType       string // numpy dtype string, e.g. "<f4"
	FillValue   string // in the new dtype: a number, true/false for bool
	// Force lets a rewrite give a version more than MaxVersionChunks chunks.
	Force bool
	// Progress, if set, is told the bands of new chunks done of the total as File goes.
	Progress func(done, total int64)
}

// Plan is what File would change.
type Plan struct {
	File, Dataset string
	Versions      []string // the versions holding the dataset, in the order they are rewritten
	Old, New      h5.DataSpec
	OldSlots      int64 // raw_data chunk slots before
	Cost                // what the rewrite makes and leaves behind
	// fillChanged: the fill value changes, so elements equal to the old one change too.
	fillChanged bool
}

// Result is what File did.
type Result struct {
	Plan
	Slots   int64 // raw_data chunk slots after
	Chunks  int64 // chunks of all versions hashed (or mapped from an equal band)
	Read    int64 // bytes of the versions read
	Elapsed time.Duration
}

// ErrUnsupported marks a dataset or an option modify does not handle.
var ErrUnsupported = errors.New("not supported")

// Changes lists what the plan changes, one phrase each ("chunks (4,) -> (6,)").
func (p Plan) Changes() []string {
	var out []string
	if !slices.Equal(p.Old.Chunks, p.New.Chunks) {
		out = append(out, fmt.Sprintf("chunks %s -> %s", chunkplan.Tuple(p.Old.Chunks), chunkplan.Tuple(p.New.Chunks)))
	}
	if p.Old.DType != p.New.DType {
		out = append(out, fmt.Sprintf("dtype %s -> %s", p.Old.DType, p.New.DType))
	}
	if a, b := compression(p.Old), compression(p.New); a != b {
		out = append(out, fmt.Sprintf("compression %s -> %s", a, b))
	}
	if p.Old.Shuffle != p.New.Shuffle {
		out = append(out, fmt.Sprintf("shuffle %s -> %s", onOff(p.Old.Shuffle), onOff(p.New.Shuffle)))
	}
	if p.fillChanged {
		out = append(out, fmt.Sprintf("fill value %x -> %x (elements equal to the old one change too)", p.Old.Fill, p.New.Fill))
	}
	return out
}

func compression(s h5.DataSpec) string {
	switch {
	case s.Gzip >= 0:
		return fmt.Sprintf("gzip=%d", s.Gzip)
	case s.LZF:
		return "lzf"
	}
	return "none"
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// File rewrites dataset (a path inside the versions, e.g. "grp/ds") of the versioned file
// at path with the changes o asks for, in every version holding it, and syncs once. With
// dryRun it only plans: nothing is written. A rewrite past MaxVersionChunks without
// o.Force is refused (ErrTooManyChunks) with the plan in the result, dry or not. It refuses,
// through HDF5's file locking, a file another program has open (a mount's view of the old
// storage would go stale); history.Modify refuses one with stages kept beside it first.
func File(file, dataset string, o Options, dryRun bool) (Result, error) {
	start := time.Now()
	dataset = strings.Trim(dataset, "/")
	if dataset == "" || path.Clean(dataset) != dataset || strings.HasPrefix(dataset, "../") || dataset == ".." {
		return Result{}, fmt.Errorf("dataset %q: not a path inside the versions", dataset)
	}
	open := versions.OpenRW
	if dryRun {
		open = versions.Open
	}
	f, err := open(file)
	if err != nil {
		return Result{}, err
	}
	defer f.Close()
	if !f.Versioned() {
		return Result{}, fmt.Errorf("not a versioned-hdf5 file: %w", ErrUnsupported)
	}
	m, err := plan(f, file, dataset, o, dryRun)
	if err != nil {
		return Result{}, err
	}
	res := Result{Plan: m.Plan}
	if err := m.checkLimit(o.Force); err != nil {
		return res, err // the plan says what the refused rewrite would cost
	}
	if dryRun {
		return res, nil
	}
	if err := m.run(&res, o.Progress); err != nil {
		return Result{}, err
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// modification is a planned File: the plan and what its run needs.
type modification struct {
	Plan
	f        *versions.File
	shapes   [][]int64 // of the dataset in each of Versions
	from, to elemType
	conv     *converter
	// strings: variable-length strings (UTF-8 if utf8, else ASCII), rewritten by value.
	strings, utf8 bool
}

// plan reads what File would change; with estimate, what it would cost (Cost: the new
// slots and the growth, from every version's chunk map and a sample of new chunks).
func plan(f *versions.File, file, dataset string, o Options, estimate bool) (*modification, error) {
	h := f.HDF5()
	members, err := h.Members(versions.VersionsGroup)
	if err != nil {
		return nil, err
	}
	m := &modification{Plan: Plan{File: file, Dataset: dataset}, f: f}
	var names []string
	for _, mb := range members {
		if mb.Kind == h5.KindGroup && mb.Name != versions.FirstVersion {
			names = append(names, mb.Name)
		}
	}
	sort.Strings(names)   // HDF5's name order, which versioned-hdf5 visits them in
	var rawChunks []int64 // raw_data's chunk shape, read once for checkReadLimit
	if raw, err := h.OpenDataset(versions.RawDataOf(dataset)); err == nil {
		rawChunks = raw.Info().Chunks
		raw.Close()
	}
	for _, v := range names {
		p := versions.InVersion(v, dataset)
		k, err := h.Kind(p)
		if err != nil || k != h5.KindDataset {
			continue
		}
		if !o.Force {
			if err := checkReadLimit(h, p, v, rawChunks); err != nil {
				return nil, err
			}
		}
		d, err := f.Dataset(p)
		if err != nil {
			return nil, fmt.Errorf("version %s: %w", v, err)
		}
		str := d.Type.VlenString
		if len(m.Versions) > 0 && str != m.strings {
			return nil, fmt.Errorf("%s in version %s: strings in some versions, numbers in others: %w", dataset, v, ErrUnsupported)
		}
		m.strings, m.utf8 = str, d.Type.UTF8
		if !d.Type.Raw && !str || len(d.Shape) == 0 || d.RawDataset() == nil {
			return nil, fmt.Errorf("%s in version %s: not a chunked versioned dataset of fixed-size elements: %w", dataset, v, ErrUnsupported)
		}
		if len(m.Versions) == 0 {
			if m.Old, err = oldSpec(d.RawDataset().Info()); err != nil {
				return nil, fmt.Errorf("%s: %w", dataset, err)
			}
		}
		if len(d.Shape) != len(m.Old.Chunks) || d.Type.DType != m.Old.DType {
			return nil, fmt.Errorf("%s in version %s: shape %v or dtype %s does not match its raw_data's", dataset, v, d.Shape, d.Type.DType)
		}
		m.Versions = append(m.Versions, v)
		m.shapes = append(m.shapes, d.Shape)
		// Its chunk map is read again when its turn comes: memory holds one version's.
		f.Forget(v)
	}
	if len(m.Versions) == 0 {
		return nil, fmt.Errorf("no version holds a dataset %s", dataset)
	}
	if k, err := h.Kind(versions.HashTableOf(dataset)); err != nil || k != h5.KindDataset {
		return nil, fmt.Errorf("%s: its data group has no hash_table", dataset)
	}
	if n, ok, err := hashtable.Largest(h, versions.HashTableOf(dataset)); err == nil && ok {
		m.OldSlots = n
	}
	if err := m.newSpec(o); err != nil {
		return nil, err
	}
	m.cost(estimate)
	return m, nil
}

// oldSpec reads the storage of a raw_data.
func oldSpec(raw h5.Info) (h5.DataSpec, error) {
	s := h5.DataSpec{DType: raw.Type.DType, Chunks: slices.Clone(raw.Chunks), Fill: slices.Clone(raw.Fill), Gzip: -1}
	for _, fl := range raw.Filters {
		switch fl.ID {
		case filterDeflate:
			s.Gzip = 4
			if len(fl.Params) > 0 {
				s.Gzip = int(fl.Params[0])
			}
		case filterShuffle:
			s.Shuffle = true
		case filterLZF:
			s.LZF = true
		default:
			return s, fmt.Errorf("raw_data has filter %d (%s), which modify does not rewrite: %w", fl.ID, fl.Name, ErrUnsupported)
		}
	}
	if len(s.Chunks) == 0 {
		return s, fmt.Errorf("raw_data is not chunked: %w", ErrUnsupported)
	}
	return s, nil
}

// newSpec applies o to the old spec, checking every option before anything is written.
func (m *modification) newSpec(o Options) error {
	var err error
	if m.strings {
		return m.newStringSpec(o)
	}
	if isStringDType(o.DType) {
		return fmt.Errorf("--dtype %s: %s holds %s numbers; casts between numbers and variable-length strings are not supported", o.DType, m.Dataset, m.Old.DType)
	}
	if m.from, err = parseType(m.Old.DType); err != nil {
		return fmt.Errorf("%s: %w", m.Dataset, err)
	}
	n := m.Old
	if err := m.setChunks(&n, o); err != nil {
		return err
	}
	if o.DType != "" {
		n.DType = o.DType
	}
	if m.to, err = parseType(n.DType); err != nil {
		return fmt.Errorf("--dtype: %w", err)
	}
	if err := setFilters(&n, o); err != nil {
		return err
	}

	// The old fill value in the new dtype, unless one is given.
	oldFill := m.Old.Fill
	if len(oldFill) != m.from.size {
		oldFill = make([]byte, m.from.size)
	}
	conv, err := newConverter(m.from, m.to, nil, nil, false)
	if err != nil {
		return fmt.Errorf("--dtype: %w", err)
	}
	n.Fill = make([]byte, m.to.size)
	conv.convert(n.Fill, oldFill)
	if o.FillValue != "" {
		fill, err := parseFill(m.to, o.FillValue)
		if err != nil {
			return fmt.Errorf("--fillvalue %w", err)
		}
		m.fillChanged = !fillEqual(m.to, fill, n.Fill)
		if m.fillChanged {
			n.Fill = fill
		}
	}
	if m.conv, err = newConverter(m.from, m.to, oldFill, n.Fill, m.fillChanged); err != nil {
		return fmt.Errorf("--dtype: %w", err)
	}
	return m.setNew(n)
}

// setNew checks the chunk size of n and makes it the new spec.
func (m *modification) setNew(n h5.DataSpec) error {
	total := int64(m.to.size)
	for _, c := range n.Chunks {
		if total > (1<<32-1)/c {
			return fmt.Errorf("--chunks %s: chunks of 4 GiB or more are beyond HDF5", chunkplan.Tuple(n.Chunks))
		}
		total *= c
	}
	m.New = n
	return nil
}

// setChunks applies --chunks to n.
func (m *modification) setChunks(n *h5.DataSpec, o Options) error {
	n.Chunks = slices.Clone(m.Old.Chunks)
	if o.Chunks == nil {
		return nil
	}
	if len(o.Chunks) != len(m.Old.Chunks) {
		return fmt.Errorf("--chunks %s: %s has %d axes, so its chunks have %d numbers", chunkplan.Tuple(o.Chunks), m.Dataset, len(m.Old.Chunks), len(m.Old.Chunks))
	}
	for _, c := range o.Chunks {
		if c <= 0 {
			return fmt.Errorf("--chunks %s: every chunk dimension must be positive", chunkplan.Tuple(o.Chunks))
		}
	}
	n.Chunks = slices.Clone(o.Chunks)
	return nil
}

// setFilters applies --compression and --shuffle to n.
func setFilters(n *h5.DataSpec, o Options) error {
	switch o.Compression {
	case "":
	case "none":
		n.Gzip, n.LZF = -1, false
	case "gzip":
		n.Gzip, n.LZF = o.GzipLevel, false
		if n.Gzip < 0 {
			n.Gzip = 4
		}
		if n.Gzip > 9 {
			return fmt.Errorf("--compression gzip=%d: the level is 0 to 9", n.Gzip)
		}
	case "lzf":
		n.Gzip, n.LZF = -1, true
	default:
		return fmt.Errorf("--compression %q: not one of none, gzip[=LEVEL], lzf", o.Compression)
	}
	if o.Shuffle != nil {
		n.Shuffle = *o.Shuffle
	}
	return nil
}

// isStringDType is whether a --dtype names variable-length strings (numpy's spellings).
func isStringDType(dt string) bool {
	switch strings.TrimLeft(dt, "<>|=") {
	case "O", "O8", "object", "str", "T":
		return true
	}
	return false
}

// newStringSpec is newSpec for variable-length strings: chunks and filters change, values
// are kept. versioned-hdf5 casts with numpy (astype), which turns numbers into strings
// and refuses most strings as numbers, and refuses a fill value other than "" for strings.
func (m *modification) newStringSpec(o Options) error {
	if o.DType != "" && !isStringDType(o.DType) {
		return fmt.Errorf("--dtype %s: %s holds variable-length strings (O); casts between strings and numbers are not supported", o.DType, m.Dataset)
	}
	if o.FillValue != "" {
		return fmt.Errorf("--fillvalue: %s holds variable-length strings, whose fill value is always \"\" (as in versioned-hdf5): %w", m.Dataset, ErrUnsupported)
	}
	n := m.Old
	n.Fill = nil
	if err := m.setChunks(&n, o); err != nil {
		return err
	}
	if err := setFilters(&n, o); err != nil {
		return err
	}
	// A chunk holds one file handle of 16 bytes an element (the strings live in the heap).
	m.from, m.to = elemType{dtype: "O", size: 16}, elemType{dtype: "O", size: 16}
	return m.setNew(n)
}
