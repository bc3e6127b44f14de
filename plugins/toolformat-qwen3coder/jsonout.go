package qwen3coder

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"unicode/utf8"
)

// notJSONError says a literal holds a value json.dumps cannot write as
// valid JSON. vLLM's whole parse fails on most of these (TypeError); for
// NaN and infinities json.dumps writes NaN/Infinity, which is not JSON.
type notJSONError struct{ what string }

func (e *notJSONError) Error() string { return e.what + ", which JSON cannot carry" }

// appendScalar writes a scalar as json.dumps would, as valid JSON.
func appendScalar(b []byte, v node) ([]byte, error) {
	switch v.typ {
	case pyStr:
		return appendJSONString(b, v.str), nil
	case pyInteger:
		if v.huge {
			return b, &notJSONError{fmt.Sprintf("an integer of more than %d digits", maxIntDigits)}
		}
		return append(b, v.str...), nil
	case pyBool:
		return strconv.AppendBool(b, v.truth), nil
	case pyNone:
		return append(b, "null"...), nil
	case pyFloatKind:
		if math.IsNaN(v.float) || math.IsInf(v.float, 0) {
			return b, &notJSONError{"a NaN or infinite number"}
		}
		return append(b, pyFloatRepr(v.float)...), nil
	}
	return b, &notJSONError{"a Python " + v.typ.String()}
}

// dictWriter is a dict being written. Its entries go to the output as
// they are read; keys Python considers equal (1, 1.0, True) are one entry
// that keeps the first key and the last value, so a repeated key makes
// the dict be written again from its entries at its end.
type dictWriter struct {
	base    int // where the dict's JSON starts in the output
	entries []dictEntry
	index   map[string]int // key identity -> entry
	rewrite bool
	keyBad  error // the first key JSON cannot carry
}

type dictEntry struct {
	key        string // as json.dumps writes it
	start, end int    // the value's JSON in the output
	bad        error
}

// dictEntry reads the value of key k and writes the entry.
func (p *litParser) dictEntry(d *dictWriter, k node) error {
	id, text, err := dictKey(k)
	if err != nil && d.keyBad == nil {
		d.keyBad = err
	}
	if len(d.entries) == 0 {
		p.out = append(p.out, '{')
	} else {
		p.out = append(p.out, ',')
	}
	p.out = append(appendJSONString(p.out, text), ':')
	start := len(p.out)
	v, err := p.expr()
	if err != nil {
		return err
	}
	bad := p.place(v)
	e := dictEntry{key: text, start: start, end: len(p.out), bad: bad}
	if j, ok := d.index[id]; ok && id != "" {
		d.entries[j].start, d.entries[j].end, d.entries[j].bad = e.start, e.end, e.bad
		d.rewrite = true
		return nil
	}
	if id != "" {
		d.index[id] = len(d.entries)
	}
	d.entries = append(d.entries, e)
	return nil
}

// endDict closes the dict and returns why it cannot be written, if so.
func (p *litParser) endDict(d *dictWriter) error {
	if d.rewrite {
		size := 2
		for _, e := range d.entries {
			size += len(e.key) + 4 + e.end - e.start
		}
		b := make([]byte, 0, size)
		for i, e := range d.entries {
			if i == 0 {
				b = append(b, '{')
			} else {
				b = append(b, ',')
			}
			b = append(appendJSONString(b, e.key), ':')
			b = append(b, p.out[e.start:e.end]...)
		}
		p.out = append(p.out[:d.base], b...)
	}
	p.out = append(p.out, '}')
	if d.keyBad != nil {
		return d.keyBad
	}
	for _, e := range d.entries {
		if e.bad != nil {
			return e.bad
		}
	}
	return nil
}

// dictKey returns a key's identity under Python equality ("" for NaN,
// which equals nothing) and the string json.dumps writes for it.
func dictKey(k node) (id, text string, err error) {
	switch k.typ {
	case pyStr:
		return "s" + k.str, k.str, nil
	case pyNone:
		return "n", "null", nil
	case pyBool:
		if k.truth {
			return "i1", "true", nil
		}
		return "i0", "false", nil
	case pyInteger:
		if k.huge {
			return "", "", &notJSONError{fmt.Sprintf("an integer of more than %d digits", maxIntDigits)}
		}
		return "i" + k.str, k.str, nil
	case pyFloatKind:
		f := k.float
		switch {
		case math.IsNaN(f):
			return "", "NaN", nil
		case math.IsInf(f, 1):
			return "f+inf", "Infinity", nil
		case math.IsInf(f, -1):
			return "f-inf", "-Infinity", nil
		case f == math.Trunc(f):
			n, _ := new(big.Float).SetFloat64(f).Int(nil)
			return "i" + n.String(), pyFloatRepr(f), nil
		}
		return "f" + pyFloatRepr(f), pyFloatRepr(f), nil
	}
	return "", "", &notJSONError{fmt.Sprintf("a dict key of type %s", k.typ)}
}

// appendJSONString writes s as a JSON string without HTML escaping, so
// arguments read as the model wrote them (<, > and & stay literal).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	safe := 0 // s[safe:i] is copied as is
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(append(b, s[safe:i]...), "\ufffd"...)
				safe = i + 1
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[safe:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		safe = i
	}
	return append(append(b, s[safe:]...), '"')
}
