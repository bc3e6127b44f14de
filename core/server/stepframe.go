package server

import (
	"unicode/utf16"
	"unicode/utf8"
)

// quickStep reads the frame a trainer sends most, {"type":"step","data":
// {"reply":"..."}}, in one pass over its bytes, as encoding/json would
// read it (escapes, surrogate pairs, each invalid UTF-8 byte or lone
// surrogate as U+FFFD). Anything else — other types, other or repeated
// keys, escaped keys, null data, a syntax error, trailing bytes — is not
// its business: ok is false and parseInbound reads the frame the long
// way, which words every refusal.
func quickStep(frame []byte) (reply string, ok bool) {
	r := frameReader{b: frame}
	if !r.object() {
		return "", false
	}
	var typ string
	seenType, seenData := false, false
	for {
		key, ok := r.key()
		if !ok {
			return "", false
		}
		switch {
		case key == "type" && !seenType:
			seenType = true
			if typ, ok = r.str(); !ok {
				return "", false
			}
		case key == "data" && !seenData:
			seenData = true
			if !r.object() {
				return "", false
			}
			if k, ok := r.key(); !ok || k != "reply" {
				return "", false
			}
			if reply, ok = r.str(); !ok || !r.end('}') {
				return "", false
			}
		default:
			return "", false
		}
		if r.end('}') {
			break
		}
		if !r.next(',') {
			return "", false
		}
	}
	r.space()
	return reply, r.i == len(r.b) && seenType && seenData && typ == "step"
}

type frameReader struct {
	b []byte
	i int
}

func (r *frameReader) space() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// next consumes c after optional whitespace.
func (r *frameReader) next(c byte) bool {
	r.space()
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

func (r *frameReader) end(c byte) bool { return r.next(c) }

// object opens a non-empty object.
func (r *frameReader) object() bool {
	if !r.next('{') {
		return false
	}
	r.space()
	return r.i < len(r.b) && r.b[r.i] == '"'
}

// key reads `"plain":`: a key without escapes (others go the long way).
func (r *frameReader) key() (string, bool) {
	if !r.next('"') {
		return "", false
	}
	start := r.i
	for r.i < len(r.b) {
		c := r.b[r.i]
		if c == '"' {
			k := string(r.b[start:r.i])
			r.i++
			return k, r.next(':')
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			return "", false
		}
		r.i++
	}
	return "", false
}

// str reads a JSON string value.
func (r *frameReader) str() (string, bool) {
	if !r.next('"') {
		return "", false
	}
	start := r.i
	// Most of a string needs no change: copy runs of it whole.
	var out []byte
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			if out == nil {
				s := string(r.b[start:r.i])
				r.i++
				return s, true
			}
			out = append(out, r.b[start:r.i]...)
			r.i++
			return string(out), true
		case c < 0x20:
			return "", false
		case c == '\\':
			if out == nil {
				out = make([]byte, 0, len(r.b)-start)
			}
			out = append(out, r.b[start:r.i]...)
			var ok bool
			if out, ok = r.escape(out); !ok {
				return "", false
			}
			start = r.i
		case c < utf8.RuneSelf:
			r.i++
		default:
			rn, size := utf8.DecodeRune(r.b[r.i:])
			if rn == utf8.RuneError && size == 1 {
				if out == nil {
					out = make([]byte, 0, len(r.b)-start+2)
				}
				out = append(out, r.b[start:r.i]...)
				out = utf8.AppendRune(out, utf8.RuneError)
				r.i++
				start = r.i
				continue
			}
			r.i += size
		}
	}
	return "", false
}

// escape reads the escape at r.i (a backslash) onto out.
func (r *frameReader) escape(out []byte) ([]byte, bool) {
	if r.i+1 >= len(r.b) {
		return out, false
	}
	c := r.b[r.i+1]
	r.i += 2
	switch c {
	case '"', '\\', '/':
		return append(out, c), true
	case 'b':
		return append(out, '\b'), true
	case 'f':
		return append(out, '\f'), true
	case 'n':
		return append(out, '\n'), true
	case 'r':
		return append(out, '\r'), true
	case 't':
		return append(out, '\t'), true
	case 'u':
	default:
		return out, false
	}
	rn, ok := r.hex4()
	if !ok {
		return out, false
	}
	if utf16.IsSurrogate(rn) {
		// A pair makes one rune; anything else leaves U+FFFD and the
		// escape after it is read on its own, as encoding/json does.
		if r.i+1 < len(r.b) && r.b[r.i] == '\\' && r.b[r.i+1] == 'u' {
			save := r.i
			r.i += 2
			if lo, ok := r.hex4(); ok {
				if dec := utf16.DecodeRune(rn, lo); dec != utf8.RuneError {
					return utf8.AppendRune(out, dec), true
				}
			}
			r.i = save
		}
		rn = utf8.RuneError
	}
	return utf8.AppendRune(out, rn), true
}

func (r *frameReader) hex4() (rune, bool) {
	if r.i+4 > len(r.b) {
		return 0, false
	}
	var v rune
	for _, c := range r.b[r.i : r.i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		v = v<<4 | rune(c)
	}
	r.i += 4
	return v, true
}
