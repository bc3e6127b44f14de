package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
)

// jnode is a JSON value with the line it starts on, so problems inside a
// task file can name their line. encoding/json has no positions, so the
// tree is built from Decoder tokens and their offsets.
type jnode struct {
	kind  byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	line  int
	str   string // string value, or a number's text
	b     bool
	keys  []jkey   // object members, in file order
	elems []*jnode // array elements
}

type jkey struct {
	name string
	line int
	val  *jnode
}

func (n *jnode) kindName() string {
	switch n.kind {
	case 'o':
		return "an object"
	case 'a':
		return "an array"
	case 's':
		return "a string"
	case 'n':
		return "a number"
	case 'b':
		return "a boolean"
	}
	return "null"
}

// lineIndex maps byte offsets to 1-based line numbers.
type lineIndex []int // offsets of each '\n'

func newLineIndex(data []byte) lineIndex {
	var idx lineIndex
	for i, c := range data {
		if c == '\n' {
			idx = append(idx, i)
		}
	}
	return idx
}

func (li lineIndex) line(off int64) int {
	return sort.Search(len(li), func(i int) bool { return int64(li[i]) >= off }) + 1
}

// jsonError is a parse failure at a line.
type jsonError struct {
	line int
	msg  string
}

func (e *jsonError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

// parseJSON parses one JSON document into a tree. Duplicate object keys
// are refused: the decoder would silently keep the last one.
func parseJSON(data []byte) (*jnode, error) {
	li := newLineIndex(data)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := &jparser{dec: dec, li: li}
	tok, err := p.next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &jsonError{line: 1, msg: "empty file"}
		}
		return nil, err
	}
	root, err := p.value(tok)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &jsonError{line: li.line(dec.InputOffset()), msg: "unexpected data after the top-level value"}
	}
	return root, nil
}

type jparser struct {
	dec *json.Decoder
	li  lineIndex
}

// tokLine is the line of the token just read: tokens never span lines, so
// its last byte's line is its line.
func (p *jparser) tokLine() int { return p.li.line(p.dec.InputOffset() - 1) }

func (p *jparser) next() (json.Token, error) {
	tok, err := p.dec.Token()
	if err == nil {
		return tok, nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return nil, &jsonError{line: p.li.line(se.Offset - 1), msg: "invalid JSON: " + se.Error()}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, &jsonError{line: len(p.li) + 1, msg: "invalid JSON: unexpected end of file"}
	}
	if err == io.EOF {
		return nil, err
	}
	return nil, &jsonError{line: p.li.line(p.dec.InputOffset()), msg: "invalid JSON: " + err.Error()}
}

func (p *jparser) value(tok json.Token) (*jnode, error) {
	n := &jnode{line: p.tokLine()}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n.kind = 'o'
			seen := map[string]int{}
			for p.dec.More() {
				kt, err := p.next()
				if err != nil {
					return nil, unexpectedEOF(err, p)
				}
				name, ok := kt.(string)
				if !ok {
					return nil, &jsonError{line: p.tokLine(), msg: "invalid JSON: object key is not a string"}
				}
				kline := p.tokLine()
				if first, dup := seen[name]; dup {
					return nil, &jsonError{line: kline, msg: fmt.Sprintf("duplicate key %q (first on line %d)", name, first)}
				}
				seen[name] = kline
				vt, err := p.next()
				if err != nil {
					return nil, unexpectedEOF(err, p)
				}
				v, err := p.value(vt)
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, jkey{name: name, line: kline, val: v})
			}
			if _, err := p.next(); err != nil { // '}'
				return nil, unexpectedEOF(err, p)
			}
		case '[':
			n.kind = 'a'
			for p.dec.More() {
				vt, err := p.next()
				if err != nil {
					return nil, unexpectedEOF(err, p)
				}
				v, err := p.value(vt)
				if err != nil {
					return nil, err
				}
				n.elems = append(n.elems, v)
			}
			if _, err := p.next(); err != nil { // ']'
				return nil, unexpectedEOF(err, p)
			}
		default:
			return nil, &jsonError{line: n.line, msg: fmt.Sprintf("invalid JSON: unexpected %q", rune(t))}
		}
	case string:
		n.kind, n.str = 's', t
	case json.Number:
		n.kind, n.str = 'n', string(t)
	case bool:
		n.kind, n.b = 'b', t
	case nil:
		n.kind = 'z'
	}
	return n, nil
}

func unexpectedEOF(err error, p *jparser) error {
	if err == io.EOF {
		return &jsonError{line: len(p.li) + 1, msg: "invalid JSON: unexpected end of file"}
	}
	return err
}

// appendJSONString appends s as a JSON string. Unlike json.Marshal it
// leaves <, > and & alone: prompts are full of them.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
