package terminal

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBoundedBuffer(t *testing.T) {
	cases := []struct {
		name   string
		limit  int
		tail   bool // a tail-only buffer
		writes []string
		want   string
		cut    int64
	}{
		{name: "fits", limit: 10, writes: []string{"abc", "def"}, want: "abcdef"},
		{name: "fits exactly", limit: 6, writes: []string{"abcdef"}, want: "abcdef"},
		{name: "head and tail", limit: 6, writes: []string{"abcdefghij"}, want: "abc\n[... 4 bytes cut ...]\nhij", cut: 4},
		{name: "many small writes", limit: 4, writes: strings.Split("0123456789", ""), want: "01\n[... 6 bytes cut ...]\n89", cut: 6},
		{name: "a broken character at either cut is dropped", limit: 8, writes: []string{"aéééééb"},
			want: "aé\n[... 6 bytes cut ...]\néb", cut: 6},
		{name: "tail only", limit: 3, tail: true, writes: []string{"abcdef"}, want: "[... 3 bytes cut ...]\ndef", cut: 3},
		{name: "tail only fits", limit: 10, tail: true, writes: []string{"ab", "c"}, want: "abc"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newBoundedBuffer(c.limit)
			if c.tail {
				b = newTailBuffer(c.limit)
			}
			for _, w := range c.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			got, cut := b.text()
			if got != c.want || cut != c.cut {
				t.Errorf("got %q (cut %d), want %q (cut %d)", got, cut, c.want, c.cut)
			}
			if !utf8.ValidString(got) {
				t.Errorf("%q is not valid UTF-8", got)
			}
		})
	}
}

// After freeze the text no longer changes, however much is written.
func TestBoundedBufferFreeze(t *testing.T) {
	b := newBoundedBuffer(100)
	_, _ = b.Write([]byte("kept"))
	b.freeze()
	_, _ = b.Write([]byte("dropped"))
	if got, _ := b.text(); got != "kept" {
		t.Errorf("got %q", got)
	}
}
