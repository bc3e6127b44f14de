package tokenizer

import (
	"strings"
	"sync"
	"sync/atomic"
)

// bpe is a byte-level BPE model. Words are raw bytes: every vocabulary entry
// was read back through the byte-level alphabet, so no text is ever mapped to
// that alphabet while encoding.
type bpe struct {
	vocab        map[string]int32 // raw bytes -> id
	vocabText    []string         // id -> the vocabulary's own string ("" for a gap)
	byteIDs      [256]int32       // id of each single byte, -1 when absent
	merges       map[uint64]uint64
	ignoreMerges bool
	unk          int32 // -1: no unknown token (unknown bytes are dropped, as HF does)
	fuseUnk      bool
	cache        *wordCache
}

// pairKey packs a merge pair; mergeVal packs its rank and the merged id.
func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func mergeVal(rank int, id int32) uint64 { return uint64(uint32(rank))<<32 | uint64(uint32(id)) }

// symbol is one part of a word while merging: a doubly linked list in an
// array, as in HF's Word, so a merge is O(1) and positions stay stable.
type symbol struct {
	id         int32
	prev, next int32
	gone       bool
}

// mergeItem is a candidate merge of the symbol at pos with the one after it.
type mergeItem struct {
	rank uint32
	pos  int32
	id   int32
}

// less orders candidates as HF does: lowest rank first, then leftmost.
func (a mergeItem) less(b mergeItem) bool {
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.pos < b.pos
}

// mergeScratch holds the buffers of one merge; pooled, so encoding a new
// word allocates only its result.
type mergeScratch struct {
	syms []symbol
	heap []mergeItem
}

var scratchPool = sync.Pool{New: func() any { return new(mergeScratch) }}

// appendWord appends the ids of one pre-tokenized word.
func (m *bpe) appendWord(out []int, w string) []int {
	if w == "" {
		return out
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[w]; ok {
			return append(out, int(id))
		}
	}
	if len(w) == 1 && m.byteIDs[w[0]] >= 0 {
		return append(out, int(m.byteIDs[w[0]]))
	}
	if ids, ok := m.cache.get(w); ok {
		for _, id := range ids {
			out = append(out, int(id))
		}
		return out
	}
	ids := m.merge(w)
	if len(w) < maxCachedWord {
		m.cache.put(w, ids)
	}
	for _, id := range ids {
		out = append(out, int(id))
	}
	return out
}

// merge runs HF's Word::merge_all on one word: a priority queue of candidate
// merges, each popped one checked against the current symbols (a stale one
// is skipped), new candidates pushed beside every merge.
func (m *bpe) merge(w string) []int32 {
	sc := scratchPool.Get().(*mergeScratch)
	defer scratchPool.Put(sc)
	syms := sc.syms[:0]
	unkOpen := false // the last symbol is an unknown token that may grow (fuse_unk)
	for i := 0; i < len(w); i++ {
		id := m.byteIDs[w[i]]
		if id < 0 {
			if m.unk < 0 {
				continue
			}
			if unkOpen && m.fuseUnk {
				continue
			}
			id, unkOpen = m.unk, true
		} else {
			unkOpen = false
		}
		n := int32(len(syms))
		syms = append(syms, symbol{id: id, prev: n - 1, next: n + 1})
	}
	if len(syms) == 0 {
		sc.syms = syms
		return nil
	}
	syms[len(syms)-1].next = -1

	h := sc.heap[:0]
	for i := 0; i+1 < len(syms); i++ {
		if v, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			h = heapPush(h, mergeItem{rank: uint32(v >> 32), pos: int32(i), id: int32(uint32(v))})
		}
	}
	for len(h) > 0 {
		var top mergeItem
		top, h = heapPop(h)
		cur := &syms[top.pos]
		if cur.gone || cur.next < 0 {
			continue
		}
		right := syms[cur.next]
		if v, ok := m.merges[pairKey(cur.id, right.id)]; !ok || int32(uint32(v)) != top.id {
			continue // stale: one side was merged since this candidate was pushed
		}
		cur.id = top.id
		syms[cur.next].gone = true
		cur.next = right.next
		if right.next >= 0 {
			syms[right.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if v, ok := m.merges[pairKey(syms[cur.prev].id, cur.id)]; ok {
				h = heapPush(h, mergeItem{rank: uint32(v >> 32), pos: cur.prev, id: int32(uint32(v))})
			}
		}
		if cur.next >= 0 {
			if v, ok := m.merges[pairKey(cur.id, syms[cur.next].id)]; ok {
				h = heapPush(h, mergeItem{rank: uint32(v >> 32), pos: top.pos, id: int32(uint32(v))})
			}
		}
	}
	n := 0
	for i := range syms {
		if !syms[i].gone {
			n++
		}
	}
	ids := make([]int32, 0, n)
	for i := range syms {
		if !syms[i].gone {
			ids = append(ids, syms[i].id)
		}
	}
	sc.syms, sc.heap = syms, h
	return ids
}

func heapPush(h []mergeItem, it mergeItem) []mergeItem {
	h = append(h, it)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].less(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func heapPop(h []mergeItem) (mergeItem, []mergeItem) {
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	i := 0
	for {
		l, r, min := 2*i+1, 2*i+2, i
		if l < len(h) && h[l].less(h[min]) {
			min = l
		}
		if r < len(h) && h[r].less(h[min]) {
			min = r
		}
		if min == i {
			return top, h
		}
		h[i], h[min] = h[min], h[i]
		i = min
	}
}

// Words are cached as HF caches them (only words shorter than this), up to
// cacheCapacity in all; past that new words are merged but not kept, so
// memory stays bounded on any input.
const (
	maxCachedWord = 256
	cacheCapacity = 1 << 17
)

// wordCache maps a word to its ids. Reads far outnumber writes once a
// corpus's common words are in, which is what sync.Map is built for: a read
// takes no lock.
type wordCache struct {
	m    sync.Map // string -> []int32
	size atomic.Int64
}

func newWordCache() *wordCache { return &wordCache{} }

func (c *wordCache) get(w string) ([]int32, bool) {
	v, ok := c.m.Load(w)
	if !ok {
		return nil, false
	}
	return v.([]int32), true
}

func (c *wordCache) put(w string, ids []int32) {
	if c.size.Load() >= cacheCapacity {
		return
	}
	if _, loaded := c.m.LoadOrStore(strings.Clone(w), ids); !loaded { // w may point into a large input
		c.size.Add(1)
	}
}
