package qwen3coder

import (
	"bytes"
	"encoding/json"
)

// objectMembers calls fn with each member of the JSON object src, key
// decoded and value as raw JSON. src must be valid JSON (json.Valid); the
// walk only has to find where each value ends. It reports whether src is
// an object. Keys are compared as Python compares them: exactly.
func objectMembers(src []byte, fn func(key string, val []byte)) bool {
	i := skipSpace(src, 0)
	if i >= len(src) || src[i] != '{' {
		return false
	}
	i = skipSpace(src, i+1)
	for i < len(src) && src[i] != '}' {
		keyEnd := skipString(src, i)
		key := decodeKey(src[i:keyEnd])
		i = skipSpace(src, skipSpace(src, keyEnd)+1) // past the ':'
		valEnd := skipValue(src, i)
		fn(key, src[i:valEnd])
		i = skipSpace(src, valEnd)
		if i < len(src) && src[i] == ',' {
			i = skipSpace(src, i+1)
		}
	}
	return true
}

func skipSpace(src []byte, i int) int {
	for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\n' || src[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the valid JSON value that starts at i.
func skipValue(src []byte, i int) int {
	switch src[i] {
	case '"':
		return skipString(src, i)
	case '{', '[':
		depth := 0
		for i < len(src) {
			switch src[i] {
			case '"':
				i = skipString(src, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(src) {
		switch src[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// skipString returns the end of the string literal that starts at i.
func skipString(src []byte, i int) int {
	for i++; i < len(src); i++ {
		switch src[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// decodeKey decodes a string literal; most have no escapes to decode.
func decodeKey(lit []byte) string {
	if bytes.IndexByte(lit, '\\') < 0 {
		return string(lit[1 : len(lit)-1])
	}
	var s string
	_ = json.Unmarshal(lit, &s)
	return s
}
