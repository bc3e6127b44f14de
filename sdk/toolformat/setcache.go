package toolformat

import (
	"container/list"
	"sync"
)

// What a plugin process keeps of the tool sets it was sent: the sets of
// the tasks in play, seldom more than a few dozen. Past either bound the
// least recently used go; a parse naming one is answered "unknown tool
// set" and the host sends it again.
const (
	maxCachedSets  = 1024
	maxCachedBytes = 256 << 20
)

// setCache is a plugin's tool sets by id, least recently used first out.
type setCache struct {
	maxSets, maxBytes int

	mu    sync.Mutex
	byID  map[string]*list.Element
	order *list.List // of *cachedSet, most recently used at the front
	bytes int
}

type cachedSet struct {
	id    string
	tools []Tool
	size  int
}

func newSetCache(maxSets, maxBytes int) *setCache {
	return &setCache{maxSets: maxSets, maxBytes: maxBytes, byID: map[string]*list.Element{}, order: list.New()}
}

// get returns the set's tools: the slice put there, not a copy, so a
// plugin sees the same slice on every parse of a set.
func (c *setCache) get(id string) ([]Tool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[id]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cachedSet).tools, true
}

// put keeps tools under id (replacing a set of that id), then drops the
// least recently used sets past the bounds, never the one just put.
func (c *setCache) put(id string, tools []Tool, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[id]; ok {
		c.bytes -= e.Value.(*cachedSet).size
		c.order.Remove(e)
	}
	c.byID[id] = c.order.PushFront(&cachedSet{id: id, tools: tools, size: size})
	c.bytes += size
	for c.order.Len() > 1 && (c.order.Len() > c.maxSets || c.bytes > c.maxBytes) {
		last := c.order.Back()
		s := last.Value.(*cachedSet)
		c.order.Remove(last)
		delete(c.byID, s.id)
		c.bytes -= s.size
	}
}
