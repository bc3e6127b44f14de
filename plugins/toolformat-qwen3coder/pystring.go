package qwen3coder

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// String literals of ast.literal_eval: prefixes, quotes, escapes and
// adjacent literals joined.

// strings reads one or more adjacent string literals (Python joins them).
func (p *litParser) strings(prefix string) (node, error) {
	var out strings.Builder
	kind := pyKind(-1)
	for {
		isBytes, err := p.stringLiteral(strings.ToLower(prefix), &out)
		if err != nil {
			return node{}, err
		}
		k := pyStr
		if isBytes {
			k = pyBytes
		}
		if kind >= 0 && kind != k {
			return node{}, p.errorf("cannot mix bytes and str literals")
		}
		kind = k
		p.space()
		prefix = ""
		c := p.peek()
		if c == '\'' || c == '"' {
			continue
		}
		if isNameStart(c) {
			j := p.i
			for j < len(p.s) && isNameChar(p.s[j]) {
				j++
			}
			if j < len(p.s) && (p.s[j] == '\'' || p.s[j] == '"') && isStringPrefix(p.s[p.i:j]) {
				prefix = p.s[p.i:j]
				p.i = j
				continue
			}
		}
		return node{kind: nodeConst, typ: kind, str: out.String()}, nil
	}
}

// stringLiteral reads one quoted literal at p.i (prefix already read).
func (p *litParser) stringLiteral(prefix string, out *strings.Builder) (isBytes bool, err error) {
	if strings.Contains(prefix, "f") {
		return false, p.errorf("f-strings are not literals")
	}
	raw, isBytes := strings.Contains(prefix, "r"), strings.Contains(prefix, "b")
	q := p.s[p.i]
	quote := string(q)
	if strings.HasPrefix(p.s[p.i:], strings.Repeat(quote, 3)) {
		quote = strings.Repeat(quote, 3)
	}
	p.i += len(quote)
	for {
		if p.i >= len(p.s) {
			return false, p.errorf("unterminated string")
		}
		if strings.HasPrefix(p.s[p.i:], quote) {
			p.i += len(quote)
			return isBytes, nil
		}
		c := p.s[p.i]
		switch {
		case c == '\n' && len(quote) == 1:
			return false, p.errorf("unterminated string")
		case c == '\\' && raw:
			if p.i+1 >= len(p.s) {
				return false, p.errorf("unterminated string")
			}
			out.WriteString(p.s[p.i : p.i+2]) // a raw backslash keeps the next char too
			p.i += 2
		case c == '\\':
			if err := p.escape(isBytes, out); err != nil {
				return false, err
			}
		default:
			out.WriteByte(c)
			p.i++
		}
	}
}

var simpleEscapes = map[byte]byte{'\\': '\\', '\'': '\'', '"': '"', 'a': 7, 'b': 8, 'f': 12, 'n': '\n', 'r': '\r', 't': '\t', 'v': 11}

// escape reads a backslash escape in a non-raw literal.
func (p *litParser) escape(isBytes bool, out *strings.Builder) error {
	if p.i+1 >= len(p.s) {
		return p.errorf("unterminated string")
	}
	c := p.s[p.i+1]
	p.i += 2
	if r, ok := simpleEscapes[c]; ok {
		out.WriteByte(r)
		return nil
	}
	hexRune := func(n int) error {
		if p.i+n > len(p.s) {
			return p.errorf("truncated \\%c escape", c)
		}
		v, err := strconv.ParseUint(p.s[p.i:p.i+n], 16, 32)
		if err != nil || strings.ContainsAny(p.s[p.i:p.i+n], "+-_") {
			return p.errorf("truncated \\%c escape", c)
		}
		if v > utf8.MaxRune {
			return p.errorf("illegal Unicode character")
		}
		p.i += n
		out.WriteRune(rune(v)) // a lone surrogate becomes U+FFFD
		return nil
	}
	switch {
	case c == '\n': // line continuation inside the string
	case c >= '0' && c <= '7':
		v := int(c - '0')
		for k := 0; k < 2 && p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '7'; k++ {
			v = v*8 + int(p.s[p.i]-'0')
			p.i++
		}
		out.WriteRune(rune(v))
	case c == 'x':
		return hexRune(2)
	case c == 'u' && !isBytes:
		return hexRune(4)
	case c == 'U' && !isBytes:
		return hexRune(8)
	case c == 'N' && !isBytes:
		return p.errorf("\\N{...} escapes are not supported")
	default: // unknown escapes keep their backslash
		out.WriteByte('\\')
		out.WriteByte(c)
	}
	return nil
}
