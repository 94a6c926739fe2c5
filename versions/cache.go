package versions

import (
	"container/list"
	"sync"
)

// chunkKey names one stored chunk: a raw_data slot. Slots are write-once, so a cached
// chunk never goes stale.
type chunkKey struct {
	raw string
	off int64
}

// chunkCache is a byte-bounded LRU of decoded chunks, shared by every dataset of a File.
type chunkCache struct {
	mu    sync.Mutex
	limit int
	used  int                        // GUARDED_BY(mu)
	order *list.List                 // front = most recent; GUARDED_BY(mu)
	items map[chunkKey]*list.Element // GUARDED_BY(mu)
}

type chunkEntry struct {
	key  chunkKey
	data []byte
}

func newChunkCache(limit int) *chunkCache {
	return &chunkCache{limit: limit, order: list.New(), items: map[chunkKey]*list.Element{}}
}

// get copies the cached chunk into dst and reports whether it was there.
func (c *chunkCache) get(k chunkKey, dst []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok || len(e.Value.(*chunkEntry).data) != len(dst) {
		return false
	}
	c.order.MoveToFront(e)
	copy(dst, e.Value.(*chunkEntry).data)
	return true
}

// put stores a copy of data, evicting the least recently used chunks beyond the limit.
func (c *chunkCache) put(k chunkKey, data []byte) {
	if len(data) > c.limit/4 {
		return // one huge chunk would flush everything else
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[k]; ok {
		return
	}
	c.items[k] = c.order.PushFront(&chunkEntry{k, append([]byte(nil), data...)})
	c.used += len(data)
	for c.used > c.limit {
		e := c.order.Back()
		ent := e.Value.(*chunkEntry)
		c.order.Remove(e)
		delete(c.items, ent.key)
		c.used -= len(ent.data)
	}
}
