package skyrl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/ardanlabs/jinja"
)

// The Go template engine (ardanlabs/jinja v1.8.0) prints a few values
// unlike Python's Jinja2 under transformers: a float through tojson or
// {{ }} (Go's %g: 1.0 prints as 1, 1e6 as 1e+06; Python's repr: 1.0,
// 1000000.0), and none through {{ }} ("" where Python prints None). Such a
// value becomes a hole: rendered once as itself and once as a marker
// string, it must leave the text the same once the markers are read back
// in Go's forms (the template only printed it); the markers are then
// replaced by Python's forms. See ChatTemplate.Render.

// holeStart and holeEnd frame a hole's marker; the \x01 after holeStart
// is escaped by tojson (\u0001) and not by {{ }}, which tells the two
// ways of printing apart. The id between them is digits and ':' only, so
// string filters leave it alone.
const (
	holeStart = "\uE000"
	holeEnd   = "\uE001"
)

// hole is one value the engine prints unlike Python, in each form.
type hole struct {
	at                     *jsonPath // where it is, for errors: tools[0].function.parameters...
	goJSON, goText, goRepr string    // tojson, {{ }}, inside a printed list or dict
	pyJSON, pyText, pyRepr string
}

// jsonValue is a JSON document as template data: plain (the values
// themselves) and marked (holes replaced by markers).
type jsonValue struct {
	plain, marked jinja.Value
	holes         map[string]hole
	// lineSep: a string holds U+2028 or U+2029, which Go's tojson escapes
	// and Python's does not; escText: a string holds the text \u2028 or
	// \u2029, which would make those escapes ambiguous in the output.
	lineSep, escText bool
	// prefix starts the ids of this document's holes; a worker parsing
	// the same document again takes the same one.
	prefix string
}

var holePrefix atomic.Int64

// parseJSONValue decodes raw into template data keeping key order (a
// *jinja.Dict, as Python's dict keeps it) and int versus float (as
// Python's json.loads does). what names the document in errors.
func parseJSONValue(raw []byte, what string) (*jsonValue, error) {
	return parseJSONValueAs(raw, what, strconv.FormatInt(holePrefix.Add(1), 10))
}

// parseJSONValueAs is parseJSONValue with the holes' id prefix given.
func parseJSONValueAs(raw []byte, what, prefix string) (*jsonValue, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	p := &jsonParser{dec: dec, v: &jsonValue{holes: map[string]hole{}, prefix: prefix}, prefix: prefix}
	plain, marked, err := p.value(&jsonPath{seg: what}, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("%s: more than one JSON value", what)
	}
	p.v.plain, p.v.marked = plain, marked
	return p.v, nil
}

type jsonParser struct {
	dec    *json.Decoder
	v      *jsonValue
	prefix string
}

// maxJSONDepth bounds the nesting of the tools and kwargs: real schemas
// nest a dozen levels, and Python's json and Jinja2 recurse, so a deeper
// document fails under transformers too.
const maxJSONDepth = 200

// jsonPath is where a value sits in its document, built into text only
// for an error: a path per value, as text, costs the square of the depth.
type jsonPath struct {
	parent *jsonPath
	seg    string // a key, or the document's name
	index  int    // in a list, when seg is ""
}

// String is the path as tools[0].function.name, each key cut to 40
// bytes.
func (p *jsonPath) String() string {
	var segs []string
	for ; p != nil; p = p.parent {
		switch {
		case p.parent == nil:
			segs = append(segs, p.seg)
		case p.seg == "":
			segs = append(segs, "["+strconv.Itoa(p.index)+"]")
		default:
			k := p.seg
			if len(k) > 40 {
				k = strings.ToValidUTF8(k[:40], "") + "…"
			}
			segs = append(segs, "."+k)
		}
	}
	slices.Reverse(segs)
	return strings.Join(segs, "")
}

func (p *jsonParser) value(path *jsonPath, depth int) (plain, marked jinja.Value, err error) {
	tok, err := p.dec.Token()
	if err != nil {
		return plain, marked, fmt.Errorf("%s: not valid JSON: %w", path, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxJSONDepth {
			return plain, marked, fmt.Errorf("%s: nests deeper than %d levels, which no tool schema needs", path, maxJSONDepth)
		}
		if t == '[' {
			var pl, mk []jinja.Value
			for i := 0; p.dec.More(); i++ {
				a, b, err := p.value(&jsonPath{parent: path, index: i}, depth+1)
				if err != nil {
					return plain, marked, err
				}
				pl, mk = append(pl, a), append(mk, b)
			}
			return jinja.NewList(pl), jinja.NewList(mk), p.close(path)
		}
		pl, mk := jinja.NewDict(), jinja.NewDict()
		for p.dec.More() {
			tok, err := p.dec.Token()
			if err != nil {
				return plain, marked, fmt.Errorf("%s: not valid JSON: %w", path, err)
			}
			key := tok.(string)
			p.noteString(key)
			seg := key
			if seg == "" {
				seg = `""` // not a list index
			}
			a, b, err := p.value(&jsonPath{parent: path, seg: seg}, depth+1)
			if err != nil {
				return plain, marked, err
			}
			// Set keeps a repeated key at its first place with its last
			// value, as a Python dict built by json.loads does.
			pl.AsDict().Set(key, a)
			mk.AsDict().Set(key, b)
		}
		return pl, mk, p.close(path)
	case string:
		p.noteString(t)
		v := jinja.NewString(t)
		return v, v, nil
	case bool:
		v := jinja.NewBool(t)
		return v, v, nil
	case nil:
		return jinja.None(), p.hole(path, "null", "", "None", "null", "None", "None"), nil
	case json.Number:
		return p.number(path, t)
	}
	return plain, marked, fmt.Errorf("%s: unexpected JSON token %v", path, tok)
}

// close reads the ] or } that ends a list or object.
func (p *jsonParser) close(path *jsonPath) error {
	if _, err := p.dec.Token(); err != nil {
		return fmt.Errorf("%s: not valid JSON: %w", path, err)
	}
	return nil
}

func (p *jsonParser) number(path *jsonPath, n json.Number) (plain, marked jinja.Value, err error) {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return plain, marked, fmt.Errorf("%s: the integer %s does not fit in 64 bits, which the Go template engine needs; write it as a string", path, s)
		}
		v := jinja.NewInt(i)
		return v, v, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return plain, marked, fmt.Errorf("%s: the number %s is out of a float's range", path, s)
	}
	v := jinja.NewFloat(f)
	goJSON, goText, py := strconv.FormatFloat(f, 'g', -1, 64), fmt.Sprintf("%g", f), pyFloatRepr(f)
	if goJSON == py && goText == py {
		return v, v, nil
	}
	return v, p.hole(path, goJSON, goText, goText, py, py, py), nil
}

// hole records a value printed unlike Python and returns its marker.
func (p *jsonParser) hole(path *jsonPath, goJSON, goText, goRepr, pyJSON, pyText, pyRepr string) jinja.Value {
	id := p.prefix + ":" + strconv.Itoa(len(p.v.holes))
	p.v.holes[id] = hole{at: path, goJSON: goJSON, goText: goText, goRepr: goRepr, pyJSON: pyJSON, pyText: pyText, pyRepr: pyRepr}
	return jinja.NewString(holeStart + "\x01" + id + holeEnd)
}

func (p *jsonParser) noteString(s string) {
	p.v.lineSep = p.v.lineSep || hasLineSep(s)
	p.v.escText = p.v.escText || hasLineSepEscape(s)
}

// hasLineSep says whether s holds U+2028 or U+2029 (E2 80 A8/A9): one
// pass, as every render checks every message.
func hasLineSep(s string) bool {
	for {
		i := strings.IndexByte(s, 0xE2)
		if i < 0 || i+2 >= len(s) {
			return false
		}
		if s[i+1] == 0x80 && (s[i+2] == 0xA8 || s[i+2] == 0xA9) {
			return true
		}
		s = s[i+1:]
	}
}

// hasLineSepEscape says whether s holds the text \u2028 or \u2029.
func hasLineSepEscape(s string) bool {
	for {
		i := strings.IndexByte(s, '\\')
		if i < 0 {
			return false
		}
		if strings.HasPrefix(s[i:], `\u2028`) || strings.HasPrefix(s[i:], `\u2029`) {
			return true
		}
		s = s[i+1:]
	}
}

// pyFloatRepr is Python's repr of a float: the shortest digits that read
// back the same, in fixed notation with at least one decimal for
// exponents -4 to 15, else d.ddde±XX.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // -d.ddde±XX
	sign := ""
	if s[0] == '-' {
		sign, s = "-", s[1:]
	}
	mant, expText, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expText)
	digits := strings.Replace(mant, ".", "", 1)
	if exp < -4 || exp >= 16 {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		es := strconv.Itoa(abs(exp))
		if len(es) < 2 {
			es = "0" + es
		}
		if exp < 0 {
			return sign + m + "e-" + es
		}
		return sign + m + "e+" + es
	}
	if exp < 0 {
		return sign + "0." + strings.Repeat("0", -exp-1) + digits
	}
	if len(digits) <= exp+1 {
		return sign + digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
	}
	return sign + digits[:exp+1] + "." + digits[exp+1:]
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// errHoleUsed says the template did more with a hole than print it.
var errHoleUsed = errors.New("the chat template does more with this value than print it")

// fillHoles replaces each marker in out by the hole's form: JSON when
// tojson printed it, repr when it sits in quotes as inside a printed list
// or dict, else text. py picks Python's forms, else Go's.
func fillHoles(out string, holes func(id string) (hole, bool), py bool) (string, error) {
	if !strings.Contains(out, holeStart) {
		return out, nil
	}
	var b strings.Builder
	b.Grow(len(out))
	for {
		i := strings.Index(out, holeStart)
		if i < 0 {
			b.WriteString(out)
			return b.String(), nil
		}
		rest := out[i+len(holeStart):]
		escaped := strings.HasPrefix(rest, `\u0001`)
		switch {
		case escaped:
			rest = rest[len(`\u0001`):]
		case strings.HasPrefix(rest, "\x01"):
			rest = rest[1:]
		default:
			return "", fmt.Errorf("%w: a marker was cut", errHoleUsed)
		}
		id, after, ok := strings.Cut(rest, holeEnd)
		h, known := holes(id)
		if !ok || !known {
			return "", fmt.Errorf("%w: a marker was changed", errHoleUsed)
		}
		before := out[:i]
		form := func(j, t, r string) string { return t }
		switch {
		case escaped && strings.HasSuffix(before, `"`) && strings.HasPrefix(after, `"`):
			before, after = before[:len(before)-1], after[1:]
			form = func(j, t, r string) string { return j }
		case !escaped && strings.HasSuffix(before, "'") && strings.HasPrefix(after, "'"):
			before, after = before[:len(before)-1], after[1:]
			form = func(j, t, r string) string { return r }
		case escaped:
			return "", fmt.Errorf("%w (at %s)", errHoleUsed, h.at)
		}
		b.WriteString(before)
		if py {
			b.WriteString(form(h.pyJSON, h.pyText, h.pyRepr))
		} else {
			b.WriteString(form(h.goJSON, h.goText, h.goRepr))
		}
		out = after
	}
}
