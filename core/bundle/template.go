package bundle

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Field bits: which keys a step has (present) and which hold placeholders
// (dyn, so their checks wait for each seed).
const (
	fID uint32 = 1 << iota
	fType
	fEnv
	fTool
	fArgs
	fSys
	fPrompt
	fTools
	fMaxTurns
	fTurn
	fPattern
	fExpected
	fCommand
)

var fieldBits = map[string]uint32{
	"id": fID, "type": fType, "env": fEnv, "tool": fTool, "arguments": fArgs,
	"system_prompt": fSys, "prompt": fPrompt, "tools": fTools, "max_turns": fMaxTurns,
	"turn": fTurn, "pattern": fPattern, "expected": fExpected, "command": fCommand,
}

// stepKeys lists, per step type, the keys it takes, in the order docs and
// errors show them.
var stepKeys = map[string][]string{
	StepDeployEnv:     {"id", "type", "env"},
	StepCallTool:      {"id", "type", "tool", "arguments", "env"},
	StepPromptAgent:   {"id", "type", "system_prompt", "prompt", "tools", "max_turns"},
	StepVerifyTool:    {"id", "type", "tool", "arguments", "env"},
	StepVerifyAnswer:  {"id", "type", "turn", "pattern", "expected"},
	StepVerifyCommand: {"id", "type", "command", "env"},
}

var stepTypes = []string{StepDeployEnv, StepCallTool, StepPromptAgent, StepVerifyTool, StepVerifyAnswer, StepVerifyCommand}

func allowedBits(typ string) uint32 {
	var bits uint32
	for _, k := range stepKeys[typ] {
		bits |= fieldBits[k]
	}
	return bits
}

// tstr is a string of a task template: literal, or parts to fill from a seed.
type tstr struct {
	s     string  // the text as written
	parts []tpart // nil: no placeholders
}

type tpart struct {
	lit string
	key string // set: a placeholder for this seed key
}

// compileStr finds the <key> placeholders of s: only names that are keys of
// the family's seed lines count, so other <...> text (<tool_call>, HTML)
// stays literal.
func compileStr(s string, keys map[string]bool, used map[string]bool) tstr {
	if len(keys) == 0 || !strings.Contains(s, "<") {
		return tstr{s: s}
	}
	var parts []tpart
	lit := 0
	for i := 0; i < len(s); {
		if s[i] != '<' {
			i++
			continue
		}
		end := strings.IndexAny(s[i+1:], "<>")
		if end < 0 {
			break
		}
		if s[i+1+end] == '<' { // "<a <key>": restart at the inner '<'
			i += 1 + end
			continue
		}
		name := s[i+1 : i+1+end]
		if !keys[name] {
			i += end + 2
			continue
		}
		if i > lit {
			parts = append(parts, tpart{lit: s[lit:i]})
		}
		parts = append(parts, tpart{key: name})
		used[name] = true
		i += end + 2
		lit = i
	}
	if parts == nil {
		return tstr{s: s}
	}
	if lit < len(s) {
		parts = append(parts, tpart{lit: s[lit:]})
	}
	return tstr{s: s, parts: parts}
}

func (t *tstr) dynamic() bool { return t.parts != nil }

// exact reports whether the string is exactly one placeholder.
func (t *tstr) exact() bool { return len(t.parts) == 1 && t.parts[0].key != "" }

func (t *tstr) render(seed map[string]any) string {
	if t.parts == nil {
		return t.s
	}
	if t.exact() {
		return seedText(seed[t.parts[0].key])
	}
	var b strings.Builder
	b.Grow(len(t.s) + 16)
	for _, p := range t.parts {
		if p.key == "" {
			b.WriteString(p.lit)
		} else {
			b.WriteString(seedText(seed[p.key]))
		}
	}
	return b.String()
}

// seedText is a seed value as text inside a string: strings as they are,
// anything else as compact JSON.
func seedText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return string(v)
	}
	return string(appendJSONValue(nil, v))
}

func appendJSONValue(dst []byte, v any) []byte {
	switch v := v.(type) {
	case string:
		return appendJSONString(dst, v)
	case json.Number:
		return append(dst, v...)
	case bool:
		if v {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case nil:
		return append(dst, "null"...)
	case []any:
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONValue(dst, e)
		}
		return append(dst, ']')
	case map[string]any:
		keys := sortedKeys(v) // as encoding/json orders them
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			dst = appendJSONValue(dst, v[k])
		}
		return append(dst, '}')
	}
	// Seeds decode to the types above only.
	panic(fmt.Sprintf("bundle: seed value of type %T", v))
}

// targs is the arguments object of a template: compact JSON with holes
// where strings hold placeholders, so a seed fills it without re-parsing.
type targs struct {
	fixed json.RawMessage // no holes
	segs  []aseg
	size  int // bytes of the literal parts: a first guess at the output size
}

type aseg struct {
	raw  []byte
	hole *tstr
}

func compileArgs(n *jnode, keys, used map[string]bool) targs {
	c := argsCompiler{keys: keys, used: used}
	c.node(n)
	if c.segs == nil {
		return targs{fixed: json.RawMessage(c.buf)}
	}
	if len(c.buf) > 0 {
		c.segs = append(c.segs, aseg{raw: c.buf})
	}
	size := 0
	for _, s := range c.segs {
		size += len(s.raw) + 16
	}
	return targs{segs: c.segs, size: size}
}

type argsCompiler struct {
	keys, used map[string]bool
	buf        []byte
	segs       []aseg
}

func (c *argsCompiler) node(n *jnode) {
	switch n.kind {
	case 'o':
		c.buf = append(c.buf, '{')
		for i, k := range n.keys {
			if i > 0 {
				c.buf = append(c.buf, ',')
			}
			c.buf = appendJSONString(c.buf, k.name)
			c.buf = append(c.buf, ':')
			c.node(k.val)
		}
		c.buf = append(c.buf, '}')
	case 'a':
		c.buf = append(c.buf, '[')
		for i, e := range n.elems {
			if i > 0 {
				c.buf = append(c.buf, ',')
			}
			c.node(e)
		}
		c.buf = append(c.buf, ']')
	case 's':
		t := compileStr(n.str, c.keys, c.used)
		if !t.dynamic() {
			c.buf = appendJSONString(c.buf, n.str)
			return
		}
		if len(c.buf) > 0 {
			c.segs = append(c.segs, aseg{raw: c.buf})
			c.buf = nil
		}
		c.segs = append(c.segs, aseg{hole: &t})
	case 'n':
		c.buf = append(c.buf, n.str...)
	case 'b':
		if n.b {
			c.buf = append(c.buf, "true"...)
		} else {
			c.buf = append(c.buf, "false"...)
		}
	default:
		c.buf = append(c.buf, "null"...)
	}
}

func (a *targs) dynamic() bool { return a.segs != nil }

func (a *targs) render(seed map[string]any) json.RawMessage {
	if a.segs == nil {
		return a.fixed
	}
	out := make([]byte, 0, a.size)
	for _, s := range a.segs {
		switch {
		case s.hole == nil:
			out = append(out, s.raw...)
		case s.hole.exact(): // "<key>" takes the value with its JSON type
			out = appendJSONValue(out, seed[s.hole.parts[0].key])
		default:
			out = appendJSONString(out, s.hole.render(seed))
		}
	}
	return out
}

// stepTmpl is one step as written, before seeds fill it.
type stepTmpl struct {
	line                                                int
	typ                                                 string
	id, env, tool, sys, prompt, turn, pattern, expected tstr
	tools, command                                      []tstr
	args                                                targs
	maxTurns                                            int
	present, dyn                                        uint32
	broken                                              uint32 // keys whose value had the wrong type
}

// taskTmpl is a task file compiled once; seeds instantiate it.
type taskTmpl struct {
	name  string
	file  string
	steps []stepTmpl
	used  []string // seed keys its placeholders use, sorted
	dyn   bool     // any placeholder at all
	base  []Step   // the steps with literal fields filled and resolved
}

// compileTask turns a task file's tree into a template, reporting every
// structural problem (shape, keys, types) at its line.
//
// A template with problems is still returned (nil only when the file is no
// array of steps) so its steps can be checked too: the fields that failed
// are marked broken and the checks reading them skipped, so one mistake is
// reported once.
func compileTask(name, file string, root *jnode, keys map[string]bool, ps *problems) (*taskTmpl, bool) {
	if root.kind != 'a' {
		ps.add(file, root.line, "a task file must be a JSON array of steps, got %s", root.kindName())
		return nil, false
	}
	if len(root.elems) == 0 {
		ps.add(file, root.line, "the task has no steps")
		return nil, false
	}
	used := map[string]bool{}
	t := &taskTmpl{name: name, file: file}
	ok := true
	for i, el := range root.elems {
		st, good := compileStep(i, file, el, keys, used, ps)
		ok = ok && good
		t.steps = append(t.steps, st)
	}
	for k := range used {
		t.used = append(t.used, k)
	}
	sort.Strings(t.used)
	t.dyn = len(t.used) > 0
	return t, ok
}

func compileStep(i int, file string, n *jnode, keys, used map[string]bool, ps *problems) (stepTmpl, bool) {
	st := stepTmpl{line: n.line}
	if n.kind != 'o' {
		ps.add(file, n.line, "step #%d must be a JSON object, got %s", i+1, n.kindName())
		return st, false
	}
	label := fmt.Sprintf("step #%d", i+1)
	for _, k := range n.keys {
		if k.name == "id" && k.val.kind == 's' {
			label = fmt.Sprintf("step %q", k.val.str)
			// Known even when the type is not, for duplicate and turn checks.
			st.id = compileStr(k.val.str, keys, used)
			st.present |= fID
		}
	}
	ok := true
	bad := func(line int, format string, args ...any) {
		ps.add(file, line, "%s: %s", label, fmt.Sprintf(format, args...))
		ok = false
	}
	for _, k := range n.keys {
		if k.name == "type" {
			if k.val.kind != 's' {
				bad(k.line, "\"type\" must be a string, got %s", k.val.kindName())
			} else if _, known := stepKeys[k.val.str]; !known {
				bad(k.line, "unknown step type %q (known: %s)", k.val.str, strings.Join(stepTypes, ", "))
			} else {
				st.typ = k.val.str
			}
		}
	}
	if st.typ == "" {
		if ok {
			bad(n.line, "has no \"type\" (one of: %s)", strings.Join(stepTypes, ", "))
		}
		st.dyn = st.dynBits()
		return st, false
	}
	allowed := allowedBits(st.typ)
	str := func(k jkey, dst *tstr) {
		if k.val.kind != 's' {
			bad(k.line, "%q must be a string, got %s", k.name, k.val.kindName())
			st.broken |= fieldBits[k.name]
			return
		}
		*dst = compileStr(k.val.str, keys, used)
	}
	list := func(k jkey) []tstr {
		if k.val.kind != 'a' {
			bad(k.line, "%q must be an array of strings, got %s", k.name, k.val.kindName())
			st.broken |= fieldBits[k.name]
			return nil
		}
		out := make([]tstr, 0, len(k.val.elems))
		for _, e := range k.val.elems {
			if e.kind != 's' {
				bad(e.line, "%q must be an array of strings, found %s", k.name, e.kindName())
				st.broken |= fieldBits[k.name]
				return nil
			}
			out = append(out, compileStr(e.str, keys, used))
		}
		return out
	}
	for _, k := range n.keys {
		bit := fieldBits[k.name]
		if bit == 0 {
			bad(k.line, "unknown key %q (a %s step takes: %s)", k.name, st.typ, strings.Join(stepKeys[st.typ], ", "))
			continue
		}
		if bit&allowed == 0 {
			bad(k.line, "key %q does not belong on a %s step (it takes: %s)", k.name, st.typ, strings.Join(stepKeys[st.typ], ", "))
			continue
		}
		st.present |= bit
		switch bit {
		case fType:
		case fID:
			st.id = tstr{}
			str(k, &st.id)
		case fEnv:
			str(k, &st.env)
		case fTool:
			str(k, &st.tool)
		case fSys:
			str(k, &st.sys)
		case fPrompt:
			str(k, &st.prompt)
		case fTurn:
			str(k, &st.turn)
		case fPattern:
			str(k, &st.pattern)
		case fExpected:
			str(k, &st.expected)
		case fTools:
			st.tools = list(k)
		case fCommand:
			st.command = list(k)
		case fArgs:
			if k.val.kind != 'o' {
				bad(k.line, "\"arguments\" must be a JSON object, got %s", k.val.kindName())
				st.broken |= fArgs
				continue
			}
			st.args = compileArgs(k.val, keys, used)
		case fMaxTurns:
			v, err := k.val.str, error(nil)
			var nt int
			if k.val.kind == 'n' {
				_, err = fmt.Sscan(v, &nt)
			}
			if k.val.kind != 'n' || err != nil || nt < 1 || fmt.Sprint(nt) != v {
				bad(k.line, "\"max_turns\" must be a whole number of at least 1")
				continue
			}
			st.maxTurns = nt
		}
	}
	st.dyn = st.dynBits()
	return st, ok
}

func (st *stepTmpl) dynBits() uint32 {
	var d uint32
	set := func(bit uint32, t *tstr) {
		if t.dynamic() {
			d |= bit
		}
	}
	set(fID, &st.id)
	set(fEnv, &st.env)
	set(fTool, &st.tool)
	set(fSys, &st.sys)
	set(fPrompt, &st.prompt)
	set(fTurn, &st.turn)
	set(fPattern, &st.pattern)
	set(fExpected, &st.expected)
	for i := range st.tools {
		set(fTools, &st.tools[i])
	}
	for i := range st.command {
		set(fCommand, &st.command[i])
	}
	if st.args.dynamic() {
		d |= fArgs
	}
	return d
}

// base builds the step as written, placeholders left as text.
func (st *stepTmpl) base() Step {
	s := Step{ID: st.id.s, Type: st.typ, Env: st.env.s, Tool: st.tool.s, SystemPrompt: st.sys.s,
		Prompt: st.prompt.s, MaxTurns: st.maxTurns, Turn: st.turn.s, Pattern: st.pattern.s,
		Expected: st.expected.s, Line: st.line}
	if st.present&fTools != 0 {
		s.Tools = make([]string, len(st.tools))
		for i := range st.tools {
			s.Tools[i] = st.tools[i].s
		}
	}
	if st.present&fCommand != 0 {
		s.Command = make([]string, len(st.command))
		for i := range st.command {
			s.Command[i] = st.command[i].s
		}
	}
	if st.present&fArgs != 0 {
		s.Arguments = st.args.fixed
	}
	return s
}

// fill replaces the fields of s that hold placeholders with the seed's
// values; the rest stays shared with the template.
func (st *stepTmpl) fill(s *Step, seed map[string]any) {
	d := st.dyn
	if d&fID != 0 {
		s.ID = st.id.render(seed)
	}
	if d&fEnv != 0 {
		s.Env = st.env.render(seed)
	}
	if d&fTool != 0 {
		s.Tool = st.tool.render(seed)
	}
	if d&fSys != 0 {
		s.SystemPrompt = st.sys.render(seed)
	}
	if d&fPrompt != 0 {
		s.Prompt = st.prompt.render(seed)
	}
	if d&fTurn != 0 {
		s.Turn = st.turn.render(seed)
	}
	if d&fPattern != 0 {
		s.Pattern = st.pattern.render(seed)
		s.Regexp = nil
	}
	if d&fExpected != 0 {
		s.Expected = st.expected.render(seed)
	}
	if d&fTools != 0 {
		s.Tools = renderList(st.tools, seed)
	}
	if d&fCommand != 0 {
		s.Command = renderList(st.command, seed)
	}
	if d&fArgs != 0 {
		s.Arguments = st.args.render(seed)
	}
}

func renderList(l []tstr, seed map[string]any) []string {
	out := make([]string, len(l))
	for i := range l {
		out[i] = l[i].render(seed)
	}
	return out
}
