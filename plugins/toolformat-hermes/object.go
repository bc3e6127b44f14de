package hermes

import (
	"bytes"
	"encoding/json"
)

// callFields are the top-level fields of a call object that matter. A
// repeated key keeps its last value, as in Python's json.loads.
type callFields struct {
	name, arguments []byte // nil when absent
	hasParameters   bool   // the common mistake of writing "parameters"
}

// objectFields splits valid JSON into its top-level fields. It returns the
// JSON kind of src and, for an object, the fields. src must be valid JSON
// (json.Valid), so the scan only has to find where each value ends.
func objectFields(src []byte) (callFields, string) {
	var f callFields
	i := skipSpace(src, 0)
	if kind := kindOf(src[i:]); kind != "object" {
		return f, kind
	}
	i = skipSpace(src, i+1)
	for i < len(src) && src[i] != '}' {
		keyEnd := skipValue(src, i)
		key := src[i:keyEnd]
		i = skipSpace(src, keyEnd)
		i = skipSpace(src, i+1) // the ':'
		valEnd := skipValue(src, i)
		switch {
		case keyIs(key, "name"):
			f.name = src[i:valEnd]
		case keyIs(key, "arguments"):
			f.arguments = src[i:valEnd]
		case keyIs(key, "parameters"):
			f.hasParameters = true
		}
		i = skipSpace(src, valEnd)
		if i < len(src) && src[i] == ',' {
			i = skipSpace(src, i+1)
		}
	}
	return f, "object"
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

// keyIs reports whether the string literal key decodes to want; keys
// without escapes (nearly all) are compared without decoding.
func keyIs(key []byte, want string) bool {
	if bytes.IndexByte(key, '\\') < 0 {
		return string(key[1:len(key)-1]) == want
	}
	var s string
	_ = json.Unmarshal(key, &s)
	return s == want
}
