package versions

// datasetChunkBudget bounds the chunks of the chunk maps a File keeps cached, about 12
// bytes each (more once a dataset's block list or xattrs are built): a mount that reads
// or commits many versions would otherwise keep every version's chunk map for its life.
const datasetChunkBudget = 2 << 20

// datasetBudget accounts for the Datasets of File.datasets that only hold a chunk map
// (no libhdf5 handle of their own, no live snapshot): those may be dropped, the least
// recently used first, and loaded again from the file's bytes when asked for. Committed
// versions never change, so a reloaded Dataset reads what the dropped one did.
type datasetBudget struct {
	limit  int64
	chunks int64  // held by droppable datasets
	tick   uint64 // a clock of uses
}

func (b *datasetBudget) reset() { b.chunks, b.tick = 0, 0 }

// droppable: a dataset whose only state is its chunk map.
func droppable(d *Dataset) bool { return d.arr != nil && d.vds == nil && !d.live }

func (b *datasetBudget) use(d *Dataset) {
	b.tick++
	d.lastUse = b.tick
}

// keep caches d at path, then drops the least recently used droppable datasets other
// than d while their chunks exceed the budget. Called with f.mu held.
func (f *File) keep(path string, d *Dataset) {
	f.datasets[path] = d
	b := &f.mapped
	b.use(d)
	if !droppable(d) {
		return
	}
	b.chunks += d.arr.NumChunks()
	for b.chunks > b.limit {
		var oldest string
		var od *Dataset
		for p, c := range f.datasets {
			if c != d && droppable(c) && (od == nil || c.lastUse < od.lastUse) {
				oldest, od = p, c
			}
		}
		if od == nil {
			return
		}
		delete(f.datasets, oldest)
		b.chunks -= od.arr.NumChunks()
	}
}
