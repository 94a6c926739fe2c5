package chunkstore

import (
	"container/list"
	"sync"
)

// chunkCacheBytes bounds the decoded chunks a Store keeps. Sequential readers are served
// by the kernel's page cache; this cache only has to span the read-ahead requests that
// fall into one chunk, and the random reads that revisit one.
const chunkCacheBytes = 32 << 20

// chunkKey names one stored chunk: a raw_data slot. Slots are write-once, so a cached
// chunk never goes stale.
type chunkKey struct {
	raw string
	off int64
}

// chunkCache is a byte-bounded LRU of decoded chunks, shared by every dataset of a Store.
type chunkCache struct {
	mu       sync.Mutex
	limit    int
	used     int                        // GUARDED_BY(mu)
	order    *list.List                 // front = most recent; GUARDED_BY(mu)
	items    map[chunkKey]*list.Element // GUARDED_BY(mu)
	inflight map[chunkKey]*load         // chunks being loaded; GUARDED_BY(mu)
}

// load is one chunk being read and decoded; others who want it wait on done.
type load struct {
	done chan struct{}
	data []byte
	err  error
}

// getOrLoad returns the cached chunk, or loads it with fn — once, however many readers ask
// at the same time (the kernel sends concurrent read-ahead requests into one chunk).
func (c *chunkCache) getOrLoad(k chunkKey, fn func() ([]byte, error)) ([]byte, error) {
	c.mu.Lock()
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		c.mu.Unlock()
		return e.Value.(*chunkEntry).data, nil
	}
	if l, ok := c.inflight[k]; ok {
		c.mu.Unlock()
		<-l.done
		return l.data, l.err
	}
	l := &load{done: make(chan struct{})}
	c.inflight[k] = l
	c.mu.Unlock()
	l.data, l.err = fn()
	if l.err == nil {
		c.put(k, l.data)
	}
	c.mu.Lock()
	delete(c.inflight, k)
	c.mu.Unlock()
	close(l.done)
	return l.data, l.err
}

type chunkEntry struct {
	key  chunkKey
	data []byte
}

func newChunkCache(limit int) *chunkCache {
	return &chunkCache{limit: limit, order: list.New(), items: map[chunkKey]*list.Element{}, inflight: map[chunkKey]*load{}}
}

// get returns the cached chunk (shared: callers must not modify it) or nil.
func (c *chunkCache) get(k chunkKey) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok {
		return nil
	}
	c.order.MoveToFront(e)
	return e.Value.(*chunkEntry).data
}

// has reports whether the chunk is cached or being loaded.
func (c *chunkCache) has(k chunkKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, cached := c.items[k]
	_, loading := c.inflight[k]
	return cached || loading
}

// put stores data, which nobody may modify afterwards, evicting the least recently used chunks beyond the limit.
func (c *chunkCache) put(k chunkKey, data []byte) {
	if len(data) > c.limit/4 {
		return // one huge chunk would flush everything else
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[k]; ok {
		return
	}
	c.items[k] = c.order.PushFront(&chunkEntry{k, data})
	c.used += len(data)
	for c.used > c.limit {
		e := c.order.Back()
		ent := e.Value.(*chunkEntry)
		c.order.Remove(e)
		delete(c.items, ent.key)
		c.used -= len(ent.data)
	}
}

// reset empties the cache (Store.Reset: a live file reopened, slots may have been rewritten).
func (c *chunkCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order.Init()
	c.items = map[chunkKey]*list.Element{}
	c.used = 0
}
