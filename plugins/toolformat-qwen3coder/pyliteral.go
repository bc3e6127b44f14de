package qwen3coder

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// pyKind is the Python type of a literal's value.
type pyKind int

const (
	pyStr pyKind = iota
	pyBytes
	pyInteger
	pyFloatKind
	pyComplex
	pyBool
	pyNone
	pyEllipsis
	pyList
	pyTuple
	pySet
	pyDict
)

var pyKindNames = [...]string{"str", "bytes", "int", "float", "complex", "bool", "None", "Ellipsis", "list", "tuple", "set", "dict"}

func (k pyKind) String() string { return pyKindNames[k] }

// nodeKind is the shape of the expression a value came from; literal_eval
// accepts a sign only on a number constant and a binary +/- only as
// real±imaginary, so the shape matters, not just the value.
type nodeKind int

const (
	nodeConst nodeKind = iota
	nodeUnary
	nodeBinary
	nodeOther
)

// node is one value read. A scalar carries its value and is written out
// by place; a container has already written its JSON to the parser's
// output, so a literal costs its JSON text, never a value per element.
type node struct {
	kind  nodeKind
	typ   pyKind
	str   string  // pyStr; pyInteger as decimal digits ("" when huge)
	float float64 // pyFloatKind
	truth bool    // pyBool
	huge  bool    // pyInteger with more decimal digits than Python writes
	// bad is why a container's JSON cannot be written (the first value
	// JSON cannot carry, in output order); its output is then garbage.
	bad error
}

// maxNesting is CPython's tokenizer limit on open brackets (MAXLEVEL).
const maxNesting = 200

var errLiteral = errors.New("not a Python literal")

// errSet is the error of every set (a flood of them costs no memory).
var errSet = &notJSONError{"a Python set"}

// literalJSON is Python's ast.literal_eval on a string, then json.dumps
// of the value: the source, with leading spaces and tabs removed, parsed
// as one expression made of constants, containers, set(), a sign on a
// number, and real±imaginary, written as JSON. The error wraps
// errLiteral when src is not a literal, and is a *notJSONError when the
// literal holds a value JSON cannot carry. The value is written as it is
// read, so the cost is its JSON text, whatever its count of values;
// every value read checks ctx now and then, so a cancelled step stops it.
// Unsupported on purpose: \N{...} escapes (Go has no Unicode name table);
// such a literal fails to read, where Python would read it.
func literalJSON(ctx context.Context, src string) ([]byte, error) {
	s := strings.TrimLeft(src, " \t")
	if strings.IndexByte(s, 0) >= 0 {
		return nil, fmt.Errorf("%w: source contains a NUL byte", errLiteral)
	}
	// Python reads source with universal newlines.
	if strings.IndexByte(s, '\r') >= 0 {
		s = strings.ReplaceAll(s, "\r\n", "\n")
		s = strings.ReplaceAll(s, "\r", "\n")
	}
	p := &litParser{s: s, ctx: ctx, out: make([]byte, 0, len(s)+16)}
	if err := p.skipBlankLines(); err != nil {
		return nil, err
	}
	n, err := p.exprList(true)
	if err != nil {
		return nil, err
	}
	if err := p.skipTrailing(); err != nil {
		return nil, err
	}
	if err := p.place(n); err != nil {
		return nil, err
	}
	return p.out, nil
}

type litParser struct {
	s    string
	i    int
	nest int
	out  []byte // the JSON of the containers read so far
	ctx  context.Context
	read int // values read, for checking ctx every so often
}

// checkEvery is how many values are read between looks at ctx.
const checkEvery = 1 << 14

// tick counts a value and, every checkEvery of them, fails the parse if
// its step was cancelled or ran out of time.
func (p *litParser) tick() error {
	if p.read++; p.read%checkEvery == 0 && p.ctx != nil {
		if err := p.ctx.Err(); err != nil {
			return fmt.Errorf("reading a Python literal: %w", err)
		}
	}
	return nil
}

// place writes n's JSON to the output (a container's is already there)
// and returns why it cannot be written, if it cannot.
func (p *litParser) place(n node) error {
	if n.typ >= pyList {
		return n.bad
	}
	var err error
	p.out, err = appendScalar(p.out, n)
	return err
}

func (p *litParser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w at offset %d: %s", errLiteral, p.i, fmt.Sprintf(format, args...))
}

func (p *litParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

// space skips what the tokenizer skips inside a logical line: blanks,
// comments, backslash-newline, and newlines inside brackets.
func (p *litParser) space() {
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c == ' ' || c == '\t' || c == '\f':
			p.i++
		case c == '#':
			for p.i < len(p.s) && p.s[p.i] != '\n' {
				p.i++
			}
		case c == '\\' && p.i+1 < len(p.s) && p.s[p.i+1] == '\n':
			p.i += 2
		case c == '\n' && p.nest > 0:
			p.i++
		default:
			return
		}
	}
}

// skipBlankLines skips leading blank and comment lines. The first line
// with code may not be indented (after the first line, whose leading
// blanks literal_eval strips).
func (p *litParser) skipBlankLines() error {
	for first := true; ; first = false {
		j := p.i
		for j < len(p.s) && (p.s[j] == ' ' || p.s[j] == '\t' || p.s[j] == '\f') {
			j++
		}
		if j < len(p.s) && p.s[j] == '#' {
			for j < len(p.s) && p.s[j] != '\n' {
				j++
			}
		}
		if j < len(p.s) && p.s[j] == '\n' {
			p.i = j + 1
			continue
		}
		if strings.HasPrefix(p.s[j:], "\\\n") { // a continued line counts as a new line here
			p.i = j + 2
			continue
		}
		if !first && strings.ContainsAny(p.s[p.i:j], " \t") {
			p.i = j
			return p.errorf("unexpected indent")
		}
		p.i = j
		return nil
	}
}

// skipTrailing accepts only blank and comment lines after the expression.
func (p *litParser) skipTrailing() error {
	for {
		p.space()
		if p.i >= len(p.s) {
			return nil
		}
		if p.s[p.i] != '\n' {
			return p.errorf("unexpected %q", p.s[p.i])
		}
		p.i++
		// CPython's tokenizer rejects a last line of only blanks as an
		// indent (it has no newline to end it).
		if rest := p.s[p.i:]; rest != "" && !strings.Contains(rest, "\n") &&
			strings.Trim(rest, " \t\f") == "" && strings.ContainsAny(rest, " \t") {
			return p.errorf("unexpected indent")
		}
	}
}

// exprList reads `expr (, expr)* [,]`: a bare tuple when there is a comma.
// At the top level it ends at the end of the line, in parentheses at ')'.
func (p *litParser) exprList(top bool) (node, error) {
	mark := len(p.out)
	first, err := p.expr()
	if err != nil {
		return node{}, err
	}
	p.space()
	if p.peek() != ',' {
		return first, nil
	}
	// A tuple: written as a list, the first item behind its bracket.
	bad := p.place(first)
	p.out = slices.Insert(p.out, mark, '[')
	for p.peek() == ',' {
		p.i++
		p.space()
		if c := p.peek(); c == 0 || (top && c == '\n') || (!top && c == ')') {
			break
		}
		p.out = append(p.out, ',')
		n, err := p.expr()
		if err != nil {
			return node{}, err
		}
		if err := p.place(n); bad == nil {
			bad = err
		}
		p.space()
	}
	p.out = append(p.out, ']')
	return node{kind: nodeOther, typ: pyTuple, bad: bad}, nil
}

// expr reads a unary expression and at most one binary + or -, then checks
// the result is a form literal_eval accepts.
func (p *litParser) expr() (node, error) {
	left, err := p.unary()
	if err != nil {
		return node{}, err
	}
	p.space()
	op := p.peek()
	if op != '+' && op != '-' {
		return left, nil
	}
	p.i++
	p.space()
	right, err := p.unary()
	if err != nil {
		return node{}, err
	}
	// literal_eval: left is a (signed) int or float, right an imaginary
	// constant; anything else is a malformed node.
	leftOK := (left.kind == nodeConst || left.kind == nodeUnary) &&
		(left.typ == pyInteger || left.typ == pyFloatKind)
	if !leftOK || right.kind != nodeConst || right.typ != pyComplex {
		return node{}, p.errorf("only real+imaginary arithmetic is a literal")
	}
	p.space()
	if c := p.peek(); c == '+' || c == '-' {
		return node{}, p.errorf("only one + or - is allowed")
	}
	return node{kind: nodeBinary, typ: pyComplex}, nil
}

// unary reads an atom with at most one sign; literal_eval allows a sign
// only directly on an int, float or complex constant.
func (p *litParser) unary() (node, error) {
	c := p.peek()
	if c != '+' && c != '-' {
		return p.atom()
	}
	p.i++
	p.space()
	operand, err := p.atom()
	if err != nil {
		return node{}, err
	}
	v := operand
	if v.kind != nodeConst || (v.typ != pyInteger && v.typ != pyFloatKind && v.typ != pyComplex) {
		return node{}, p.errorf("a sign applies only to a number")
	}
	if c == '-' {
		switch v.typ {
		case pyInteger:
			if v.str != "0" && !v.huge {
				if strings.HasPrefix(v.str, "-") {
					v.str = v.str[1:]
				} else {
					v.str = "-" + v.str
				}
			}
		case pyFloatKind:
			v.float = -v.float
		}
	}
	v.kind = nodeUnary
	return v, nil
}

func (p *litParser) atom() (node, error) {
	if err := p.tick(); err != nil {
		return node{}, err
	}
	c := p.peek()
	switch {
	case c == 0:
		return node{}, p.errorf("unexpected end of input")
	case c == '(' || c == '[' || c == '{':
		return p.container(c)
	case c == '\'' || c == '"':
		return p.strings("")
	case c >= '0' && c <= '9', c == '.' && p.i+1 < len(p.s) && p.s[p.i+1] >= '0' && p.s[p.i+1] <= '9':
		return p.number()
	case c == '.' && strings.HasPrefix(p.s[p.i:], "..."):
		p.i += 3
		return node{kind: nodeConst, typ: pyEllipsis}, nil
	case isNameStart(c):
		return p.name()
	}
	r, _ := utf8.DecodeRuneInString(p.s[p.i:])
	return node{}, p.errorf("unexpected %q", r)
}

func isNameStart(c byte) bool { return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') || c >= 0x80 }
func isNameChar(c byte) bool  { return isNameStart(c) || (c >= '0' && c <= '9') }

func (p *litParser) name() (node, error) {
	start := p.i
	for p.i < len(p.s) && isNameChar(p.s[p.i]) {
		p.i++
	}
	word := p.s[start:p.i]
	if c := p.peek(); (c == '\'' || c == '"') && isStringPrefix(word) {
		return p.strings(word)
	}
	switch word {
	case "True", "False":
		return node{kind: nodeConst, typ: pyBool, truth: word == "True"}, nil
	case "None":
		return node{kind: nodeConst, typ: pyNone}, nil
	case "set": // set() is the only call literal_eval allows
		p.space()
		if p.peek() == '(' {
			p.i++
			p.nest++
			p.space()
			if p.peek() == ')' {
				p.i++
				p.nest--
				return node{kind: nodeOther, typ: pySet, bad: errSet}, nil
			}
		}
	}
	p.i = start
	return node{}, p.errorf("name %q is not a literal", word)
}

func isStringPrefix(w string) bool {
	switch strings.ToLower(w) {
	case "r", "u", "b", "br", "rb", "f", "fr", "rf":
		return true
	}
	return false
}

// number reads an int, float or imaginary literal.
func (p *litParser) number() (node, error) {
	start := p.i
	digits := func(ok func(byte) bool) bool { // digit (_? digit)*
		if p.i >= len(p.s) || !ok(p.s[p.i]) {
			return false
		}
		for p.i < len(p.s) {
			if ok(p.s[p.i]) {
				p.i++
			} else if p.s[p.i] == '_' && p.i+1 < len(p.s) && ok(p.s[p.i+1]) {
				p.i += 2
			} else {
				break
			}
		}
		return true
	}
	dec := func(c byte) bool { return c >= '0' && c <= '9' }
	var val node
	if base, ok := basePrefix(p.s[p.i:]); ok {
		p.i += 2
		if p.peek() == '_' {
			p.i++
		}
		if !digits(func(c byte) bool { return digitOf(c) < base }) {
			return node{}, p.errorf("invalid base-%d literal", base)
		}
		val = radixInteger(p.s[start+2:p.i], base)
	} else {
		intPart := digits(dec)
		isFloat := false
		if p.peek() == '.' {
			p.i++
			isFloat = true
			if !digits(dec) && !intPart {
				return node{}, p.errorf("invalid decimal literal")
			}
		}
		if c := p.peek(); c == 'e' || c == 'E' {
			p.i++
			if c := p.peek(); c == '+' || c == '-' {
				p.i++
			}
			if !digits(dec) {
				return node{}, p.errorf("invalid decimal literal")
			}
			isFloat = true
		}
		text := strings.ReplaceAll(p.s[start:p.i], "_", "")
		switch c := p.peek(); {
		case c == 'j' || c == 'J':
			p.i++
			val = node{typ: pyComplex}
		case isFloat:
			f, err := strconv.ParseFloat(text, 64)
			if err != nil && !isRangeErr(err) {
				return node{}, p.errorf("invalid decimal literal")
			}
			val = node{typ: pyFloatKind, float: f}
		default:
			if len(text) > 1 && text[0] == '0' && strings.Trim(text, "0") != "" {
				return node{}, p.errorf("leading zeros in decimal integer literals are not permitted")
			}
			if tooManyDigits(text) {
				return node{}, p.errorf("exceeds the limit (%d digits) for integer string conversion", maxIntDigits)
			}
			val = node{typ: pyInteger, str: decimalInteger(text)}
		}
	}
	if c := p.peek(); isNameChar(c) || c == '.' {
		return node{}, p.errorf("invalid number literal")
	}
	val.kind = nodeConst
	return val, nil
}

// decimalInteger is a decimal literal's digits (at most maxIntDigits of
// them, checked) without leading zeros.
func decimalInteger(text string) string {
	if len(text) <= 18 {
		n, _ := strconv.ParseInt(text, 10, 64)
		return strconv.FormatInt(n, 10)
	}
	n, _ := new(big.Int).SetString(text, 10)
	return n.String()
}

// radixInteger is a hex, octal or binary literal's value. Python reads
// one of any length, but json.dumps cannot write more than maxIntDigits
// decimal digits; the digits' count says which side of that a value is
// before anything is converted (converting millions of digits to decimal
// took seconds of a core), and only a value near the edge is converted.
func radixInteger(text string, base int) node {
	digits := strings.TrimLeft(strings.ReplaceAll(text, "_", ""), "0")
	// A value of n digits is at least base^(n-1): past 10^maxIntDigits it
	// has more decimal digits than Python writes.
	if float64(len(digits)-1)*math.Log10(float64(base)) > maxIntDigits+1 {
		return node{typ: pyInteger, huge: true}
	}
	if digits == "" {
		return node{typ: pyInteger, str: "0"}
	}
	n, _ := new(big.Int).SetString(digits, base)
	s := n.String()
	if len(s) > maxIntDigits {
		return node{typ: pyInteger, huge: true}
	}
	return node{typ: pyInteger, str: s}
}

func basePrefix(s string) (int, bool) {
	if len(s) < 2 || s[0] != '0' {
		return 0, false
	}
	switch s[1] | 0x20 {
	case 'x':
		return 16, true
	case 'o':
		return 8, true
	case 'b':
		return 2, true
	}
	return 0, false
}

func digitOf(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c|0x20 >= 'a' && c|0x20 <= 'f':
		return int(c|0x20-'a') + 10
	}
	return 99
}

// container reads a tuple or parenthesised expression, a list, a dict or
// a set, writing its JSON as it goes.
func (p *litParser) container(open byte) (node, error) {
	if p.nest >= maxNesting {
		return node{}, p.errorf("too many nested parentheses")
	}
	p.i++
	p.nest++
	defer func() { p.nest-- }()
	p.space()
	closeFor := map[byte]byte{'(': ')', '[': ']', '{': '}'}[open]
	if p.peek() == closeFor {
		p.i++
		switch open {
		case '(':
			p.out = append(p.out, "[]"...)
			return node{kind: nodeOther, typ: pyTuple}, nil
		case '[':
			p.out = append(p.out, "[]"...)
			return node{kind: nodeOther, typ: pyList}, nil
		}
		p.out = append(p.out, "{}"...)
		return node{kind: nodeOther, typ: pyDict}, nil
	}
	if open == '(' {
		n, err := p.exprList(false)
		if err != nil {
			return node{}, err
		}
		if err := p.expect(')'); err != nil {
			return node{}, err
		}
		return n, nil // parentheses leave the expression's shape unchanged
	}
	base := len(p.out)
	if open == '[' {
		p.out = append(p.out, '[')
	}
	var bad error
	var d *dictWriter
	for i := 0; ; i++ {
		mark := len(p.out)
		k, err := p.expr()
		if err != nil {
			return node{}, err
		}
		p.space()
		if open == '{' && i == 0 && p.peek() == ':' {
			d = &dictWriter{base: base, index: map[string]int{}}
		}
		if d != nil {
			p.out = p.out[:mark] // a key's JSON is its string
			if err := p.expect(':'); err != nil {
				return node{}, err
			}
			p.space()
			if err := p.dictEntry(d, k); err != nil {
				return node{}, err
			}
			p.space()
		} else {
			if err := p.place(k); bad == nil {
				bad = err
			}
			if open == '{' {
				p.out = p.out[:base] // a set is never written
			}
		}
		if p.peek() != ',' {
			break
		}
		p.i++
		p.space()
		if p.peek() == closeFor {
			break
		}
		if open == '[' {
			p.out = append(p.out, ',')
		}
	}
	if err := p.expect(closeFor); err != nil {
		return node{}, err
	}
	switch {
	case open == '[':
		p.out = append(p.out, ']')
		return node{kind: nodeOther, typ: pyList, bad: bad}, nil
	case d != nil:
		return node{kind: nodeOther, typ: pyDict, bad: p.endDict(d)}, nil
	}
	return node{kind: nodeOther, typ: pySet, bad: errSet}, nil
}

func (p *litParser) expect(c byte) error {
	p.space()
	if p.peek() != c {
		if p.i >= len(p.s) {
			return p.errorf("expected %q, got end of input", c)
		}
		return p.errorf("expected %q, got %q", c, p.s[p.i])
	}
	p.i++
	return nil
}
