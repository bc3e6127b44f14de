package episode

import (
	"unicode/utf8"
)

// encodedLen is the length of s as encoding/json writes it in a string
// (quotes left out): what a tool result costs the frame that carries it.
// HTML characters, control characters and invalid bytes take six.
func encodedLen(s string) int64 {
	var n int64
	for i := 0; i < len(s); {
		w, size := runeCost(s[i:])
		n += w
		i += size
	}
	return n
}

// runeCost is the encoded cost of the character that starts s, and its size.
func runeCost(s string) (int64, int) {
	c := s[0]
	if c < utf8.RuneSelf {
		switch {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
			return 2, 1
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			return 6, 1
		}
		return 1, 1
	}
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
		return 6, size
	}
	return int64(size), size
}

// clipEncoded cuts s on a character boundary to at most limit encoded
// bytes, returning what is kept and how many bytes of s were cut.
func clipEncoded(s string, limit int64) (string, int64) {
	var n int64
	for i := 0; i < len(s); {
		w, size := runeCost(s[i:])
		if n+w > limit {
			return s[:i], int64(len(s) - i)
		}
		n += w
		i += size
	}
	return s, 0
}
