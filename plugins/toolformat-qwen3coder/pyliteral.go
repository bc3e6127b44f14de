package qwen3coder

import (
	"errors"
	"fmt"
	"math/big"
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

// pyValue is a value ast.literal_eval can produce.
type pyValue struct {
	kind  pyKind
	str   string  // pyStr, pyBytes; pyInteger as decimal digits
	float float64 // pyFloatKind
	truth bool    // pyBool
	items []pyValue
	keys  []pyValue // pyDict: keys[i] maps to items[i]
}

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

type node struct {
	kind nodeKind
	val  pyValue
}

// maxNesting is CPython's tokenizer limit on open brackets (MAXLEVEL).
const maxNesting = 200

var errLiteral = errors.New("not a Python literal")

// literalEval is Python's ast.literal_eval on a string: the source, with
// leading spaces and tabs removed, parsed as one expression made of
// constants, containers, set(), a sign on a number, and real±imaginary.
// Unsupported on purpose: \N{...} escapes (Go has no Unicode name table);
// such a literal fails to read, where Python would read it.
func literalEval(src string) (pyValue, error) {
	s := strings.TrimLeft(src, " \t")
	if strings.IndexByte(s, 0) >= 0 {
		return pyValue{}, fmt.Errorf("%w: source contains a NUL byte", errLiteral)
	}
	// Python reads source with universal newlines.
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	p := &litParser{s: s}
	if err := p.skipBlankLines(); err != nil {
		return pyValue{}, err
	}
	n, err := p.exprList(true)
	if err != nil {
		return pyValue{}, err
	}
	if err := p.skipTrailing(); err != nil {
		return pyValue{}, err
	}
	return n.val, nil
}

type litParser struct {
	s    string
	i    int
	nest int
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
	first, err := p.expr()
	if err != nil {
		return node{}, err
	}
	p.space()
	if p.peek() != ',' {
		return first, nil
	}
	items := []pyValue{first.val}
	for p.peek() == ',' {
		p.i++
		p.space()
		if c := p.peek(); c == 0 || (top && c == '\n') || (!top && c == ')') {
			break
		}
		n, err := p.expr()
		if err != nil {
			return node{}, err
		}
		items = append(items, n.val)
		p.space()
	}
	return node{kind: nodeOther, val: pyValue{kind: pyTuple, items: items}}, nil
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
		(left.val.kind == pyInteger || left.val.kind == pyFloatKind)
	if !leftOK || right.kind != nodeConst || right.val.kind != pyComplex {
		return node{}, p.errorf("only real+imaginary arithmetic is a literal")
	}
	p.space()
	if c := p.peek(); c == '+' || c == '-' {
		return node{}, p.errorf("only one + or - is allowed")
	}
	return node{kind: nodeBinary, val: pyValue{kind: pyComplex}}, nil
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
	v := operand.val
	if operand.kind != nodeConst || (v.kind != pyInteger && v.kind != pyFloatKind && v.kind != pyComplex) {
		return node{}, p.errorf("a sign applies only to a number")
	}
	if c == '-' {
		switch v.kind {
		case pyInteger:
			if v.str != "0" {
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
	return node{kind: nodeUnary, val: v}, nil
}

func (p *litParser) atom() (node, error) {
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
		return node{kind: nodeConst, val: pyValue{kind: pyEllipsis}}, nil
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
		return node{kind: nodeConst, val: pyValue{kind: pyBool, truth: word == "True"}}, nil
	case "None":
		return node{kind: nodeConst, val: pyValue{kind: pyNone}}, nil
	case "set": // set() is the only call literal_eval allows
		p.space()
		if p.peek() == '(' {
			p.i++
			p.nest++
			p.space()
			if p.peek() == ')' {
				p.i++
				p.nest--
				return node{kind: nodeOther, val: pyValue{kind: pySet}}, nil
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
	var val pyValue
	if base, ok := basePrefix(p.s[p.i:]); ok {
		p.i += 2
		if p.peek() == '_' {
			p.i++
		}
		if !digits(func(c byte) bool { return digitOf(c) < base }) {
			return node{}, p.errorf("invalid base-%d literal", base)
		}
		n, _ := new(big.Int).SetString(strings.ReplaceAll(p.s[start+2:p.i], "_", ""), base)
		val = pyValue{kind: pyInteger, str: n.String()}
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
			val = pyValue{kind: pyComplex}
		case isFloat:
			f, err := strconv.ParseFloat(text, 64)
			if err != nil && !isRangeErr(err) {
				return node{}, p.errorf("invalid decimal literal")
			}
			val = pyValue{kind: pyFloatKind, float: f}
		default:
			if len(text) > 1 && text[0] == '0' && strings.Trim(text, "0") != "" {
				return node{}, p.errorf("leading zeros in decimal integer literals are not permitted")
			}
			if tooManyDigits(text) {
				return node{}, p.errorf("exceeds the limit (%d digits) for integer string conversion", maxIntDigits)
			}
			n, _ := new(big.Int).SetString(text, 10)
			val = pyValue{kind: pyInteger, str: n.String()}
		}
	}
	if c := p.peek(); isNameChar(c) || c == '.' {
		return node{}, p.errorf("invalid number literal")
	}
	return node{kind: nodeConst, val: val}, nil
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
// a set.
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
			return node{kind: nodeOther, val: pyValue{kind: pyTuple}}, nil
		case '[':
			return node{kind: nodeOther, val: pyValue{kind: pyList}}, nil
		}
		return node{kind: nodeOther, val: pyValue{kind: pyDict}}, nil
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
	var keys, items []pyValue
	isDict := false
	for i := 0; ; i++ {
		k, err := p.expr()
		if err != nil {
			return node{}, err
		}
		p.space()
		if open == '{' && i == 0 && p.peek() == ':' {
			isDict = true
		}
		if isDict {
			if err := p.expect(':'); err != nil {
				return node{}, err
			}
			p.space()
			v, err := p.expr()
			if err != nil {
				return node{}, err
			}
			keys, items = append(keys, k.val), append(items, v.val)
			p.space()
		} else {
			items = append(items, k.val)
		}
		if p.peek() != ',' {
			break
		}
		p.i++
		p.space()
		if p.peek() == closeFor {
			break
		}
	}
	if err := p.expect(closeFor); err != nil {
		return node{}, err
	}
	switch {
	case open == '[':
		return node{kind: nodeOther, val: pyValue{kind: pyList, items: items}}, nil
	case isDict:
		return node{kind: nodeOther, val: pyValue{kind: pyDict, keys: keys, items: items}}, nil
	}
	return node{kind: nodeOther, val: pyValue{kind: pySet, items: items}}, nil
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
