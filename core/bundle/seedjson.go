package bundle

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeSeedObject parses one seeds line: a JSON object, numbers kept as
// json.Number so integers stay exact. It is a small hand-written parser
// because encoding/json's reflection was most of the time of loading a big
// family; it is also stricter (duplicate keys, invalid UTF-8 refused).
func decodeSeedObject(data []byte) (map[string]any, error) {
	p := seedParser{data: data}
	p.space()
	if p.i >= len(p.data) || p.data[p.i] != '{' {
		return nil, p.fail("a seed line must be a JSON object")
	}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i < len(p.data) {
		return nil, p.fail("unexpected data after the object (one JSON object per line)")
	}
	return v.(map[string]any), nil
}

type seedParser struct {
	data []byte
	i    int
}

const maxSeedDepth = 1000

func (p *seedParser) fail(msg string) error {
	return fmt.Errorf("%s (column %d)", msg, p.i+1)
}

func (p *seedParser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *seedParser) value(depth int) (any, error) {
	if depth > maxSeedDepth {
		return nil, p.fail("invalid JSON: nested too deeply")
	}
	p.space()
	if p.i >= len(p.data) {
		return nil, p.fail("invalid JSON: unexpected end of line")
	}
	switch c := p.data[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, p.fail(fmt.Sprintf("invalid JSON: unexpected %q", p.data[p.i]))
}

func (p *seedParser) literal(word string) error {
	if len(p.data)-p.i < len(word) || string(p.data[p.i:p.i+len(word)]) != word {
		return p.fail("invalid JSON: expected " + word)
	}
	p.i += len(word)
	return nil
}

func (p *seedParser) object(depth int) (any, error) {
	p.i++ // '{'
	m := make(map[string]any, 8)
	p.space()
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		return m, nil
	}
	for {
		p.space()
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return nil, p.fail("invalid JSON: expected a string key")
		}
		at := p.i
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		if _, dup := m[k]; dup {
			p.i = at
			return nil, p.fail(fmt.Sprintf("duplicate key %q", k))
		}
		p.space()
		if p.i >= len(p.data) || p.data[p.i] != ':' {
			return nil, p.fail("invalid JSON: expected ':' after a key")
		}
		p.i++
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m[k] = v
		p.space()
		if p.i >= len(p.data) {
			return nil, p.fail("invalid JSON: unexpected end of line in an object")
		}
		switch p.data[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return m, nil
		default:
			return nil, p.fail("invalid JSON: expected ',' or '}'")
		}
	}
}

func (p *seedParser) array(depth int) (any, error) {
	p.i++ // '['
	a := []any{}
	p.space()
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		return a, nil
	}
	for {
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		p.space()
		if p.i >= len(p.data) {
			return nil, p.fail("invalid JSON: unexpected end of line in an array")
		}
		switch p.data[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return a, nil
		default:
			return nil, p.fail("invalid JSON: expected ',' or ']'")
		}
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (p *seedParser) number() (any, error) {
	start := p.i
	d := p.data
	if d[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(d) && d[p.i] == '0':
		p.i++
	case p.i < len(d) && d[p.i] >= '1' && d[p.i] <= '9':
		for p.i < len(d) && isDigit(d[p.i]) {
			p.i++
		}
	default:
		return nil, p.fail("invalid JSON: bad number")
	}
	if p.i < len(d) && d[p.i] == '.' {
		p.i++
		if p.i >= len(d) || !isDigit(d[p.i]) {
			return nil, p.fail("invalid JSON: bad number")
		}
		for p.i < len(d) && isDigit(d[p.i]) {
			p.i++
		}
	}
	if p.i < len(d) && (d[p.i] == 'e' || d[p.i] == 'E') {
		p.i++
		if p.i < len(d) && (d[p.i] == '+' || d[p.i] == '-') {
			p.i++
		}
		if p.i >= len(d) || !isDigit(d[p.i]) {
			return nil, p.fail("invalid JSON: bad number")
		}
		for p.i < len(d) && isDigit(d[p.i]) {
			p.i++
		}
	}
	return json.Number(d[start:p.i]), nil
}

// str reads a JSON string; most have no escapes and cost one allocation.
func (p *seedParser) str() (string, error) {
	p.i++ // '"'
	start := p.i
	d := p.data
	ascii := true
	for p.i < len(d) {
		c := d[p.i]
		switch {
		case c == '"':
			s := d[start:p.i]
			if !ascii && !utf8.Valid(s) {
				return "", p.fail("invalid UTF-8 in a string")
			}
			p.i++
			return string(s), nil
		case c == '\\':
			return p.strSlow(start)
		case c < 0x20:
			return "", p.fail("invalid JSON: control character in a string")
		case c >= 0x80:
			ascii = false
		}
		p.i++
	}
	return "", p.fail("invalid JSON: unterminated string")
}

func (p *seedParser) strSlow(start int) (string, error) {
	d := p.data
	buf := make([]byte, 0, p.i-start+16)
	buf = append(buf, d[start:p.i]...)
	for p.i < len(d) {
		c := d[p.i]
		switch {
		case c == '"':
			if !utf8.Valid(buf) {
				return "", p.fail("invalid UTF-8 in a string")
			}
			p.i++
			return string(buf), nil
		case c < 0x20:
			return "", p.fail("invalid JSON: control character in a string")
		case c != '\\':
			buf = append(buf, c)
			p.i++
			continue
		}
		p.i++
		if p.i >= len(d) {
			break
		}
		switch e := d[p.i]; e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := p.hex4(p.i + 1)
			if !ok {
				return "", p.fail("invalid JSON: bad \\u escape")
			}
			p.i += 4
			if utf16.IsSurrogate(r) {
				// A pair makes one rune; a lone half is U+FFFD, as encoding/json does.
				r2, ok := rune(-1), false
				if p.i+2 < len(d) && d[p.i+1] == '\\' && d[p.i+2] == 'u' {
					r2, ok = p.hex4(p.i + 3)
				}
				if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
					r = dec
					p.i += 6
				} else {
					r = utf8.RuneError
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", p.fail("invalid JSON: bad escape")
		}
		p.i++
	}
	return "", p.fail("invalid JSON: unterminated string")
}

func (p *seedParser) hex4(at int) (rune, bool) {
	if at+4 > len(p.data) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(p.data[at:at+4]), 16, 32)
	return rune(v), err == nil
}
