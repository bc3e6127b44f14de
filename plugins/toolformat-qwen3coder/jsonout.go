package qwen3coder

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// notJSONError says a literal holds a value json.dumps cannot write as
// valid JSON. vLLM's whole parse fails on most of these (TypeError); for
// NaN and infinities json.dumps writes NaN/Infinity, which is not JSON.
type notJSONError struct{ what string }

func (e *notJSONError) Error() string { return e.what + ", which JSON cannot carry" }

// appendPyJSON writes v as json.dumps would, as valid JSON.
func appendPyJSON(b []byte, v pyValue) ([]byte, error) {
	switch v.kind {
	case pyStr:
		return appendJSONString(b, v.str), nil
	case pyInteger:
		if tooManyDigits(strings.TrimPrefix(v.str, "-")) {
			return nil, &notJSONError{fmt.Sprintf("an integer of more than %d digits", maxIntDigits)}
		}
		return append(b, v.str...), nil
	case pyBool:
		return strconv.AppendBool(b, v.truth), nil
	case pyNone:
		return append(b, "null"...), nil
	case pyFloatKind:
		if math.IsNaN(v.float) || math.IsInf(v.float, 0) {
			return nil, &notJSONError{"a NaN or infinite number"}
		}
		return append(b, pyFloatRepr(v.float)...), nil
	case pyList, pyTuple:
		b = append(b, '[')
		for i, item := range v.items {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendPyJSON(b, item); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case pyDict:
		return appendPyDict(b, v)
	}
	return nil, &notJSONError{"a Python " + v.kind.String()}
}

// appendPyDict writes a dict: keys become strings as json.dumps makes
// them, and keys Python considers equal (1, 1.0, True) are one entry that
// keeps the first key and the last value.
func appendPyDict(b []byte, v pyValue) ([]byte, error) {
	type entry struct {
		key string
		val pyValue
	}
	var entries []entry
	index := map[string]int{}
	for i, k := range v.keys {
		id, text, err := dictKey(k)
		if err != nil {
			return nil, err
		}
		if j, ok := index[id]; ok && id != "" {
			entries[j].val = v.items[i]
			continue
		}
		if id != "" {
			index[id] = len(entries)
		}
		entries = append(entries, entry{text, v.items[i]})
	}
	b = append(b, '{')
	for i, e := range entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, e.key)
		b = append(b, ':')
		var err error
		if b, err = appendPyJSON(b, e.val); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// dictKey returns a key's identity under Python equality ("" for NaN,
// which equals nothing) and the string json.dumps writes for it.
func dictKey(k pyValue) (id, text string, err error) {
	switch k.kind {
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
	return "", "", &notJSONError{fmt.Sprintf("a dict key of type %s", k.kind)}
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
