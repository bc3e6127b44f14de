package terminal

import (
	"fmt"
	"sync"
	"unicode/utf8"
)

// boundedBuffer keeps the first and the last bytes written to it, up to
// max in all, and counts what it dropped between them: a command may print
// gigabytes, the model sees the start (what went wrong first) and the end
// (where it stopped). Safe for concurrent use; after freeze, writes are
// counted and dropped, so a reader can take its text while a background
// process still writes.
type boundedBuffer struct {
	mu      sync.Mutex
	headMax int
	tailMax int
	head    []byte
	tail    []byte // the last bytes past head; may exceed tailMax until trimmed
	total   int64
	frozen  bool
}

// newTailBuffer keeps only the last limit bytes.
func newTailBuffer(limit int) *boundedBuffer {
	return &boundedBuffer{tailMax: max(limit, 1)}
}

func newBoundedBuffer(limit int) *boundedBuffer {
	limit = max(limit, 2)
	return &boundedBuffer{headMax: limit / 2, tailMax: limit - limit/2}
}

// Write never fails: dropping is the point.
func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.frozen {
		return len(p), nil
	}
	n := len(p)
	b.total += int64(n)
	if room := b.headMax - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if len(p) >= b.tailMax {
		b.tail = append(b.tail[:0], p[len(p)-b.tailMax:]...)
		return n, nil
	}
	b.tail = append(b.tail, p...)
	if len(b.tail) > 2*b.tailMax { // trim now and then, not on every write
		b.tail = append(b.tail[:0], b.tail[len(b.tail)-b.tailMax:]...)
	}
	return n, nil
}

// freeze stops keeping what is written from now on.
func (b *boundedBuffer) freeze() {
	b.mu.Lock()
	b.frozen = true
	b.mu.Unlock()
}

// text is what was kept: the whole output when it fit, else its head and
// tail joined by a note saying how many bytes were cut. The cut falls on
// UTF-8 character boundaries, so the text holds no broken character the
// cut made.
func (b *boundedBuffer) text() (string, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	tail := b.tail
	if len(tail) > b.tailMax {
		tail = tail[len(tail)-b.tailMax:]
	}
	if b.total == int64(len(b.head)+len(tail)) {
		return string(b.head) + string(tail), 0
	}
	head := trimBrokenEnd(b.head)
	tail = trimBrokenStart(tail)
	cut := b.total - int64(len(head)+len(tail))
	if len(head) == 0 {
		return fmt.Sprintf("[... %d bytes cut ...]\n%s", cut, tail), cut
	}
	return fmt.Sprintf("%s\n[... %d bytes cut ...]\n%s", head, cut, tail), cut
}

// trimBrokenEnd drops a character cut short at the end of p.
func trimBrokenEnd(p []byte) []byte {
	for i := 1; i < utf8.UTFMax && i <= len(p); i++ {
		c := p[len(p)-i]
		if !utf8.RuneStart(c) {
			continue // a continuation byte: its lead byte is further back
		}
		if seqLen(c) > i {
			return p[:len(p)-i] // the character needs bytes the cut took
		}
		return p
	}
	return p
}

// seqLen is the length of the UTF-8 sequence that lead byte c starts.
func seqLen(c byte) int {
	switch {
	case c&0xE0 == 0xC0:
		return 2
	case c&0xF0 == 0xE0:
		return 3
	case c&0xF8 == 0xF0:
		return 4
	}
	return 1
}

// trimBrokenStart drops the continuation bytes of a character whose start
// was cut.
func trimBrokenStart(p []byte) []byte {
	i := 0
	for i < utf8.UTFMax-1 && i < len(p) && !utf8.RuneStart(p[i]) {
		i++
	}
	return p[i:]
}
