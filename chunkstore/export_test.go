package chunkstore

import (
	"github.com/vh5fs/vh5fs/chunkplan"
	"github.com/vh5fs/vh5fs/h5"
)

// What the external tests (which open files through package versions) look at inside.

const ReadAheadBytes = readAheadBytes

func (c *Chunked) ReadSlot(off int64, size int) ([]byte, bool, error) { return c.readSlot(off, size) }

func (c *Chunked) Plan(off, n int64) (*chunkplan.GetItemPlan, error) {
	return c.m.GetItemPlan(off, n)
}

func (c *Chunked) ReadPlan(plan *chunkplan.GetItemPlan, p []byte) error {
	return c.m.ReadPlan(plan, p, c)
}

func (c *Chunked) PiecesOf(off, n int64) ([]chunkplan.Run, *chunkplan.GetItemPlan, bool, error) {
	return c.piecesOf(off, n)
}

func (c *Chunked) PlanPieces(plan *chunkplan.GetItemPlan) ([]chunkplan.Run, bool) {
	return c.planPieces(plan)
}

func (c *Chunked) Locate(pieces []chunkplan.Run, p []byte, maxRange int) (Reply, bool, error) {
	return c.locate(pieces, p, maxRange)
}

func (c *Chunked) FileSpans(pieces []chunkplan.Run) ([]span, bool) { return c.fileSpans(pieces) }

func (c *Chunked) Slices(off int64, n int) ([][]byte, bool, error) { return c.slices(off, n) }

func (c *Chunked) SlotsAt(offs ...int64) ([]h5.ChunkInfo, bool) {
	cis, _, ok := c.slots(offs...)
	return cis, ok
}

// Cached reports whether the chunk at raw_data row off is cached or being loaded.
func (c *Chunked) Cached(off int64) bool { return c.s.chunks.has(chunkKey{c.src.Path, off}) }

// AheadBusy is how many read-ahead workers of the store run.
func (c *Chunked) AheadBusy() int { return len(c.s.ahead) }

// SetMaxPieces sets the pieces one pass of c.Read plans (0: the default), for tests.
func SetMaxPieces(c *Chunked, n int) { c.maxPieces = n }
