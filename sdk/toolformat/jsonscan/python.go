package jsonscan

import (
	"bytes"
	"math"
	"strconv"
)

// Python's json.loads, which vLLM's parsers use, reads a superset of JSON:
// NaN, Infinity and -Infinity are numbers, and it reads every number in
// full (a float too large for a double is inf; an integer of more than
// 4,300 digits is an error). The helpers here let a parser see those
// tokens in text that Go's encoding/json rejects or reads differently.

// Number is a number token outside a JSON text's strings: [Start, End) in
// the text; NonFinite for Python's NaN, Infinity and -Infinity.
type Number struct {
	Start, End int
	NonFinite  bool
}

// nonFinite are Python's extra number tokens, longest first, each with a
// placeholder of the same length that is one complete JSON value: a digit
// or letter after it cannot join it into a longer valid token.
var nonFinite = []struct{ token, placeholder string }{
	{"-Infinity", "[0      ]"},
	{"Infinity", "[0     ]"},
	{"NaN", "[0]"},
}

// Numbers calls fn with each number token in src outside its string
// literals, in order. src need not be valid JSON: a number token is then a
// maximal run of the characters numbers are made of.
func Numbers(src []byte, fn func(Number)) {
	for i := 0; i < len(src); {
		switch c := src[i]; {
		case c == '"':
			i = SkipString(src, i)
			continue
		case c == '-' || c == 'N' || c == 'I':
			if tok := nonFiniteAt(src, i); tok != "" {
				fn(Number{Start: i, End: i + len(tok), NonFinite: true})
				i += len(tok)
				continue
			}
			if c != '-' {
				break
			}
			fallthrough
		case c >= '0' && c <= '9':
			start := i
			for i < len(src) && isNumberByte(src[i]) {
				i++
			}
			fn(Number{Start: start, End: i})
			continue
		}
		i++
	}
}

func nonFiniteAt(src []byte, i int) string {
	for _, nf := range nonFinite {
		if bytes.HasPrefix(src[i:], []byte(nf.token)) {
			return nf.token
		}
	}
	return ""
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// MaskNonFinite returns src with each NaN, Infinity and -Infinity outside
// strings replaced by a JSON value of the same length, so that Go's
// json.Valid checks the rest of Python's grammar and its error offsets
// still point into src. It returns src itself when there is none.
func MaskNonFinite(src []byte) []byte {
	out, copied := src, false
	Numbers(src, func(n Number) {
		if !n.NonFinite {
			return
		}
		if !copied {
			out, copied = bytes.Clone(src), true
		}
		for _, nf := range nonFinite {
			if len(nf.token) == n.End-n.Start {
				copy(out[n.Start:], nf.placeholder)
			}
		}
	})
	return out
}

// IsInteger reports whether a valid JSON number token is an integer (no
// fraction, no exponent): Python's json reads it as an int, anything else
// as a float.
func IsInteger(tok []byte) bool { return bytes.IndexAny(tok, ".eE") < 0 }

// MaxIntDigits is CPython's limit on the decimal digits of an int read
// from or written as text (sys.get_int_max_str_digits()): json.loads
// refuses a longer integer, and json.dumps cannot write one.
const MaxIntDigits = 4300

// Oddity is how Python's json reads a number token that vLLM cannot pass
// on as JSON.
type Oddity int

const (
	// Plain numbers read and write back as JSON.
	Plain Oddity = iota
	// NonFiniteValue is NaN, Infinity, -Infinity, or a float too large
	// for a double (Python reads inf): json.dumps writes NaN or Infinity,
	// which is not JSON.
	NonFiniteValue
	// LongInteger is an integer of more than MaxIntDigits digits, which
	// json.loads refuses.
	LongInteger
)

// Oddity classifies the number token n of src.
func (n Number) Oddity(src []byte) Oddity {
	if n.NonFinite {
		return NonFiniteValue
	}
	tok := src[n.Start:n.End]
	if IsInteger(tok) {
		if len(bytes.TrimPrefix(tok, []byte("-"))) > MaxIntDigits {
			return LongInteger
		}
		return Plain
	}
	if f, err := strconv.ParseFloat(string(tok), 64); err != nil && math.IsInf(f, 0) {
		return NonFiniteValue
	}
	return Plain
}

// FirstOdd returns the first number token in src with the given oddity.
func FirstOdd(src []byte, want Oddity) (Number, bool) {
	var found Number
	ok := false
	Numbers(src, func(n Number) {
		if !ok && n.Oddity(src) == want {
			found, ok = n, true
		}
	})
	return found, ok
}
