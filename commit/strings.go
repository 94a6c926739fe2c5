package commit

import (
	"fmt"
	"slices"

	"github.com/vh5fs/vh5fs/chunkplan"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/hashtable"
	"github.com/vh5fs/vh5fs/versions"
)

// Strings are the new values of a variable-length string dataset, whole: its shape and
// its elements in C order. A write of such a dataset's file (its text) replaces them all.
type Strings struct {
	Shape  []int64
	Values []string
}

// planStrings plans the commit of s over ds, a string dataset of the base (or a new one),
// as versioned-hdf5 commits an assignment of every element (ds[...] = values, after
// ds.resize when the shape changes): that replaces the staged array with the values
// themselves (DatasetWrapper's hot swap to an InMemoryArrayDataset), whose commit
// (write_dataset) hashes every chunk in C order of the grid as the library hashes object
// chunks (hashtable.HashStrings) and reuses an existing slot or one of this commit's
// chunks with the same digest. Unlike a partial write's commit it leaves no chunk
// unmapped, even a whole chunk of "".
func (c *Committer) planStrings(ds *versions.Dataset, s *Strings, ix *index) (plan, Result, error) {
	var res Result
	chunks := ds.Chunks
	rank := len(chunks)
	p := plan{rank: rank}
	if len(s.Shape) != rank || chunkplan.Elements(s.Shape) != int64(len(s.Values)) {
		return p, res, fmt.Errorf("%s: %d strings for shape %v", ds.Path, len(s.Values), s.Shape)
	}
	if chunkplan.Elements(s.Shape) == 0 {
		return p, res, nil
	}
	grid := make([]int64, rank)
	for i := range grid {
		grid[i] = (s.Shape[i] + chunks[i] - 1) / chunks[i]
	}
	pending := map[[32]byte]int64{}
	g, start, trimmed := make([]int64, rank), make([]int64, rank), make([]int64, rank)
	for {
		extent(trimmed, s.Shape, chunks, g)
		for i := range start {
			start[i] = g[i] * chunks[i]
		}
		vals := takeBox(s.Values, s.Shape, start, trimmed)
		d := hashtable.HashStrings(vals, trimmed)
		row, isNew := p.slot(ix, pending, d)
		if isNew {
			p.fresh = append(p.fresh, newChunk{strs: vals, trimmed: slices.Clone(trimmed), row: row, digest: d})
			res.Written++
			for _, v := range vals {
				res.Bytes += int64(len(v))
			}
		} else {
			res.Reused++
		}
		p.emit(g, chunks, trimmed, row)
		if !chunkplan.Next(g, grid) {
			return p, res, nil
		}
	}
}

// takeBox returns the elements of the box at start of extent count, in C order, of vals,
// an array of the given shape in C order (the inverse of versions' placeBox).
func takeBox(vals []string, shape, start, count []int64) []string {
	rank := len(shape)
	row := count[rank-1]
	out := make([]string, 0, chunkplan.Elements(count))
	idx := make([]int64, rank) // the row's index in the box; idx[rank-1] stays 0
	for {
		at := int64(0)
		for i, s := range shape {
			at = at*s + start[i] + idx[i]
		}
		out = append(out, vals[at:at+row]...)
		if rank == 1 || !chunkplan.Next(idx[:rank-1], count[:rank-1]) {
			return out
		}
	}
}

// writeStrings writes new string chunks into raw_data at their slots, each its trimmed
// box (the slot's padding stays NULL, which reads as "", as the library's writes leave it).
func writeStrings(raw *h5.Dataset, fresh []newChunk) error {
	start := make([]int64, len(raw.Info().Chunks))
	for _, nc := range fresh {
		start[0] = nc.row
		if err := raw.WriteStrings(start, nc.trimmed, nc.strs); err != nil {
			return err
		}
	}
	return nil
}
