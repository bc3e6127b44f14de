// Package jsonscan walks JSON that is already known to be valid
// (json.Valid) without decoding it: tool-format parsers use it to split a
// call object into its members and pass arguments on exactly as the model
// wrote them.
package jsonscan

// Members calls fn with each member of the JSON object src: the key as its
// raw string literal (quotes and escapes included) and the value as raw
// JSON. src must be valid JSON. It reports whether src is an object; for
// anything else fn is never called.
func Members(src []byte, fn func(rawKey, val []byte)) bool {
	i := SkipSpace(src, 0)
	if i >= len(src) || src[i] != '{' {
		return false
	}
	i = SkipSpace(src, i+1)
	for i < len(src) && src[i] != '}' {
		keyEnd := SkipString(src, i)
		key := src[i:keyEnd]
		i = SkipSpace(src, SkipSpace(src, keyEnd)+1) // past the ':'
		valEnd := SkipValue(src, i)
		fn(key, src[i:valEnd])
		i = SkipSpace(src, valEnd)
		if i < len(src) && src[i] == ',' {
			i = SkipSpace(src, i+1)
		}
	}
	return true
}

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func SkipSpace(src []byte, i int) int {
	for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\n' || src[i] == '\r') {
		i++
	}
	return i
}

// SkipValue returns the end of the valid JSON value that starts at i.
func SkipValue(src []byte, i int) int {
	switch src[i] {
	case '"':
		return SkipString(src, i)
	case '{', '[':
		depth := 0
		for i < len(src) {
			switch src[i] {
			case '"':
				i = SkipString(src, i)
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

// SkipString returns the end of the string literal that starts at i.
func SkipString(src []byte, i int) int {
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
