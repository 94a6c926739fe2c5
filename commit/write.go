package commit

import (
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/hashtable"
	"github.com/vh5fs/vh5fs/versions"
)

// appendChunks writes the new chunks into raw_data, then their rows into hash_table, then
// largest_index: in that order, so a crash leaves only ignored tails (spec section 4).
func (c *Committer) appendChunks(cd *changedDataset, res *Result) error {
	ds, ix, fresh := cd.ds, cd.ix, cd.plan.fresh
	if len(fresh) == 0 {
		return nil
	}
	// Added to: a tree's commit appends to several datasets.
	t0 := time.Now()
	var data time.Duration
	defer func() { res.Data += data; res.Table += time.Since(t0) - data }()
	raw := ds.RawDataset()
	chunks := ds.Chunks
	n := ix.largest + int64(len(fresh))
	dims := slices.Clone(chunks)
	dims[0] = n * ix.rows
	if err := c.claimSlots(ds.DataGroup(), ix, fresh); err != nil {
		return err
	}
	if err := raw.SetExtent(dims); err != nil {
		return err
	}
	toWrite := make([]newChunk, 0, len(fresh))
	for _, nc := range fresh {
		if nc.inPlace {
			res.Ahead++
		} else {
			toWrite = append(toWrite, nc)
		}
	}
	var err error
	if cd.strs != nil {
		err = writeStrings(raw, toWrite)
	} else {
		err = c.writeChunks(raw, toWrite, cd.arr.ChunkBytes())
	}
	if err != nil {
		return err
	}
	data = time.Since(t0)
	rows := make([]byte, 0, len(fresh)*hashtable.RowBytes)
	for _, nc := range fresh {
		rows = hashtable.Row{Digest: nc.digest, Start: nc.row, Stop: nc.row + nc.trimmed[0]}.Append(rows)
	}
	if err := hashtable.Write(c.f.HDF5(), ix.table, ix.path, ix.largest, rows, n, n); err != nil {
		return err
	}
	for _, nc := range fresh {
		ix.slots[nc.digest] = nc.row
	}
	ix.largest = n
	return nil
}

// writeChunks writes the new chunks into raw_data at their slots, in slot order. Whole
// chunks not encoded when they were written are read back (if spilled) and encoded on
// every core, a bounded window ahead of the writer; whole chunks are stored with direct
// chunk writes; edge chunks, and every chunk of a pipeline the encoder does not run, go
// through libhdf5's filtered write of their trimmed box, which leaves the slot's padding
// as versioned-hdf5's writes leave it.
func (c *Committer) writeChunks(raw *h5.Dataset, fresh []newChunk, chunkBytes int) error {
	chunks := raw.Info().Chunks
	enc := newEncoder(raw.Info().Filters, raw.Info().Type.Size)
	zero := make([]int64, len(chunks))
	loads := sync.Pool{New: func() any { b := make([]byte, chunkBytes); return &b }}
	type stored struct {
		data    []byte  // what to write
		encoded []byte  // the encoder's buffer data is in, if any
		load    *[]byte // the loads buffer holding the chunk, if read back
		direct  bool    // data is the whole chunk as stored: a direct chunk write
	}
	release := func(s stored) {
		if s.encoded != nil {
			enc.release(s.encoded)
		}
		if s.load != nil {
			loads.Put(s.load)
		}
	}
	produce := func(i int) (stored, error) {
		nc := &fresh[i]
		if nc.encoded != nil && enc != nil && slices.Equal(nc.trimmed, chunks) {
			return stored{data: nc.encoded, direct: true}, nil // encoded when it was written
		}
		var s stored
		data := nc.data
		if data == nil {
			s.load = loads.Get().(*[]byte)
			var err error
			if data, err = nc.bytes(*s.load); err != nil {
				release(s)
				return stored{}, err
			}
		}
		s.data = data
		if enc == nil || !slices.Equal(nc.trimmed, chunks) {
			return s, nil
		}
		out, owned, err := enc.encode(data)
		if err != nil {
			release(s)
			return stored{}, err
		}
		s.data, s.direct = out, true
		if owned {
			s.encoded = out
		}
		return s, nil
	}
	consume := func(i int, s stored) error {
		defer release(s)
		nc := &fresh[i]
		start := make([]int64, len(chunks))
		start[0] = nc.row
		var err error
		if s.direct {
			err = raw.WriteChunk(start, 0, s.data)
		} else {
			err = raw.WriteBox(start, nc.trimmed, chunks, zero, s.data)
		}
		if err == nil && nc.release && nc.spilled != nil {
			nc.arr.ReleaseSpilled(*nc.spilled)
		}
		return err
	}
	// The chunks go to the file's page cache past its durable end: have the kernel write
	// them back every writebackBytes, on a goroutine of its own, rather than all at the sync.
	var kick, kicked chan struct{} // made at the first start: a small commit starts none
	defer func() {
		if kick != nil {
			close(kick)
			<-kicked
		}
	}()
	var since int64
	write := consume
	consume = func(i int, s stored) error {
		if since += int64(len(s.data)); since >= writebackBytes {
			since = 0
			if kick == nil {
				kick, kicked = make(chan struct{}, 1), make(chan struct{})
				go func() {
					defer close(kicked)
					for range kick {
						if err := c.f.HDF5().StartWriteback(); err != nil {
							slog.Debug("writeback not started", "err", err)
						}
					}
				}()
			}
			select {
			case kick <- struct{}{}:
			default: // one is pending: it covers these pages too
			}
		}
		return write(i, s)
	}
	return Ordered(len(fresh), 4*workers(), produce, consume, release)
}

// writebackBytes is how much a commit writes between two starts of the file's writeback.
const writebackBytes = 16 << 20

// loadUnchanged loads the base version's datasets other than the changed ones whose lists
// copyVirtual would copy (and which a commit could have created: fixed-size elements);
// once the commit's write has begun, datasets can no longer be loaded.
func (c *Committer) loadUnchanged(base versions.Version, changed func(path string) bool) map[string]*versions.Dataset {
	paths, err := c.f.DatasetPaths(base.Name)
	if err != nil {
		return nil // H5Ocopy copies them all
	}
	out := map[string]*versions.Dataset{}
	for _, p := range paths {
		src := base.Path() + "/" + p
		if changed(p) {
			continue
		}
		if copies, err := c.f.HDF5().CopiesMappingList(src); err != nil || !copies {
			continue // H5Ocopy copies it; loading it would only add to that
		}
		if ds, err := c.f.Dataset(src); err == nil && ds.Stageable() {
			out[src] = ds
		}
	}
	return out
}

// copyVirtual copies ds, the version dataset at src, to dst with its mapping list as
// stored (h5's CopyVirtual, attributes aside); false if H5Ocopy must copy it.
func (c *Committer) copyVirtual(ds *versions.Dataset, src, dst string) (bool, error) {
	if ds == nil {
		return false, nil
	}
	return c.f.HDF5().CopyVirtual(dst, src, ds.RawDataset(), ds.Shape, definedFill(ds))
}

func (c *Committer) createVirtual(ds *versions.Dataset, dst string, shape []int64, p *plan) error {
	vs, cs, ss := p.vstart, p.count, p.sstart
	if slices.Contains(shape, 0) {
		vs, cs, ss = nil, nil, nil // a zero-size dataset maps nothing
	}
	return c.f.HDF5().CreateVirtualFlat(dst, ds.RawDataset(), shape, definedFill(ds), vs, cs, ss)
}

// definedFill is the fill value a new version of ds sets: nil if ds's creator set none.
func definedFill(ds *versions.Dataset) []byte {
	if !ds.FillDefined() {
		return nil
	}
	return ds.Fill
}
