package skyrl

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"time"
)

// TokenizerConfig is what a chat template needs from a model's
// tokenizer_config.json (or chat_template.jinja): the template and the
// special tokens transformers hands it. A token the model lacks is "".
type TokenizerConfig struct {
	ChatTemplate string
	BOSToken     string
	EOSToken     string
	PadToken     string
	UnkToken     string
	// Source names the file the template came from, for errors; "" is
	// "the chat template".
	Source string
}

// Message is one chat message of a prompt.
type Message struct {
	Role    string `json:"role" parquet:"role"`
	Content string `json:"content" parquet:"content"`
}

// ChatTemplate is a model's chat template, rendered as transformers'
// apply_chat_template renders it: trim_blocks and lstrip_blocks (the
// engine's own defaults), tojson as json.dumps(ensure_ascii=False) with
// keys in their order, raise_exception, strftime_now, the special tokens,
// and tools/documents/add_generation_prompt as keyword arguments. It is
// safe for concurrent use.
//
// A template comes from a tokenizer folder, which is not to be trusted:
// it is compiled and rendered in worker processes with bounded stack,
// memory, time and output (see sandbox.go), so that a template that
// recurses, loops or prints without end fails its render, naming the
// file, instead of crashing or exhausting this process. Close stops them.
type ChatTemplate struct {
	escText bool // the template's text holds \u2028 or \u2029
	pool    *renderPool
	// Now is the clock strftime_now reads; nil is time.Now.
	Now func() time.Time
}

// errRaised marks an error the template raised with raise_exception.
var errRaised = errors.New("the chat template refused the prompt")

// NewChatTemplate compiles cfg's template (in a worker process).
func NewChatTemplate(cfg TokenizerConfig) (*ChatTemplate, error) {
	if strings.TrimSpace(cfg.ChatTemplate) == "" {
		return nil, errors.New("the tokenizer has no chat template (tokenizer_config.json's chat_template, or chat_template.jinja)")
	}
	if strings.Contains(cfg.ChatTemplate, holeStart) {
		return nil, errors.New("the chat template holds U+E000, which the writer uses as a marker")
	}
	init := workerInit{Template: cfg.ChatTemplate, Special: map[string]string{}, MaxMemory: workerMaxMemory, Timeout: renderTimeout}
	// transformers passes the special tokens the tokenizer has
	// (special_tokens_map): a token it lacks is undefined, not "".
	for name, tok := range map[string]string{"bos_token": cfg.BOSToken, "eos_token": cfg.EOSToken, "pad_token": cfg.PadToken, "unk_token": cfg.UnkToken} {
		if tok != "" {
			init.Special[name] = tok
		}
	}
	pool, err := newRenderPool(init, cfg.Source)
	if err != nil {
		return nil, err
	}
	t := &ChatTemplate{escText: hasLineSepEscape(cfg.ChatTemplate), pool: pool}
	// A template dropped without Close still stops its workers.
	runtime.AddCleanup(t, func(p *renderPool) { p.close() }, pool)
	return t, nil
}

// Close stops the template's worker processes; a render after Close
// fails.
func (t *ChatTemplate) Close() { t.pool.close() }

// reservedKwargs are apply_chat_template's own arguments: Python refuses
// a template keyword argument of the same name.
var reservedKwargs = map[string]bool{"messages": true, "tools": true, "documents": true, "add_generation_prompt": true}

// Kwargs is a parsed --chat-template-kwargs object.
type Kwargs struct {
	v   *jsonValue
	raw string
}

// ParseKwargs reads a JSON object of template keyword arguments, such as
// SkyRL's generator.chat_template_kwargs ({"enable_thinking": false}).
// "" is none.
func ParseKwargs(raw string) (Kwargs, error) {
	if strings.TrimSpace(raw) == "" {
		return Kwargs{}, nil
	}
	v, err := parseJSONValue([]byte(raw), "chat template kwargs")
	if err != nil {
		return Kwargs{}, err
	}
	if !v.plain.IsDict() {
		return Kwargs{}, fmt.Errorf("chat template kwargs: want a JSON object such as {\"enable_thinking\": false}, got %s", strings.TrimSpace(raw))
	}
	for _, k := range v.plain.AsDict().Keys {
		if reservedKwargs[k] {
			return Kwargs{}, fmt.Errorf("chat template kwargs: %q is apply_chat_template's own argument, not a template setting", k)
		}
	}
	return Kwargs{v: v, raw: raw}, nil
}

// Tools is a parsed list of tools (OpenAI function schemas), kept in
// their JSON key order as the template dumps them.
type Tools struct {
	v     *jsonValue
	names []string
	raw   []byte
	id    string // names raw for the workers, which keep each one parsed
}

// MaxToolsBytes bounds a toolset's tools: every prompt of the toolset
// carries them, and 2 MiB of schemas is some 500,000 tokens, past any
// model's context; a larger list would only cost minutes and gigabytes per
// prompt before the length check refused it.
const MaxToolsBytes = 2 << 20

// ParseTools reads a JSON list of tools; what names it in errors.
func ParseTools(raw []byte, what string) (Tools, error) {
	if len(raw) > MaxToolsBytes {
		return Tools{}, fmt.Errorf("%s: %d bytes of tool schemas, over the bound of %d (about 500,000 tokens, longer than a model's context, which every prompt would carry): give the toolset fewer or shorter tools", what, len(raw), MaxToolsBytes)
	}
	v, err := parseJSONValue(raw, what)
	if err != nil {
		return Tools{}, err
	}
	if !v.plain.IsList() {
		return Tools{}, fmt.Errorf("%s: want a JSON list of tools", what)
	}
	sum := sha256.Sum256(raw)
	t := Tools{v: v, raw: raw, id: hex.EncodeToString(sum[:16])}
	for i, tool := range v.plain.AsList().Items {
		name := ""
		if tool.IsDict() {
			f, _ := tool.AsDict().Get("function")
			if !f.IsDict() { // a bare function schema, as some servers send
				f = tool
			}
			if n, ok := f.AsDict().Get("name"); ok && n.IsString() {
				name = n.AsString()
			}
		}
		if name == "" {
			return Tools{}, fmt.Errorf("%s[%d]: a tool without a function name", what, i)
		}
		t.names = append(t.names, name)
	}
	return t, nil
}

// Names returns the tools' function names in order.
func (t Tools) Names() []string { return t.names }

// Len is the number of tools.
func (t Tools) Len() int { return len(t.names) }

// Render renders messages as apply_chat_template(messages, tools=tools,
// add_generation_prompt=addGen, **kwargs) does. tools with no value
// passes tools=None.
func (t *ChatTemplate) Render(messages []Message, tools Tools, addGen bool, kwargs Kwargs) (string, error) {
	var parts []*jsonValue
	if tools.v != nil {
		parts = append(parts, tools.v)
	}
	if kwargs.v != nil {
		parts = append(parts, kwargs.v)
	}
	out, err := t.render(messages, tools, addGen, kwargs, false)
	if err != nil {
		return "", err
	}
	holes := func(id string) (hole, bool) {
		for _, p := range parts {
			if h, ok := p.holes[id]; ok {
				return h, true
			}
		}
		return hole{}, false
	}
	nHoles := 0
	for _, p := range parts {
		nHoles += len(p.holes)
	}
	if nHoles > 0 {
		marked, err := t.render(messages, tools, addGen, kwargs, true)
		if err != nil {
			return "", holeError(parts, err)
		}
		asGo, err := fillHoles(marked, holes, false)
		if err != nil || asGo != out {
			return "", holeError(parts, err)
		}
		if out, err = fillHoles(marked, holes, true); err != nil {
			return "", holeError(parts, err)
		}
	}
	lineSep, escText := false, t.escText
	for _, m := range messages {
		lineSep = lineSep || hasLineSep(m.Content) || hasLineSep(m.Role)
		escText = escText || hasLineSepEscape(m.Content) || hasLineSepEscape(m.Role)
	}
	for _, p := range parts {
		lineSep, escText = lineSep || p.lineSep, escText || p.escText
	}
	if lineSep {
		// Go's tojson escapes U+2028 and U+2029, Python's writes them
		// as they are: unescape, unless the text \u2028 could also be
		// the prompt's own.
		if escText {
			return "", errors.New(`the prompt or its tools hold both the character U+2028 or U+2029 and the text \u2028 or \u2029, which the Go template engine cannot render as transformers does`)
		}
		out = strings.NewReplacer(`\u2028`, "\u2028", `\u2029`, "\u2029").Replace(out)
	}
	return out, nil
}

func holeError(parts []*jsonValue, err error) error {
	var paths []string
	for _, p := range parts {
		for _, h := range p.holes {
			paths = append(paths, fmt.Sprintf("%s (transformers prints %s, the Go template engine %s)", h.at, h.pyText, printedGo(h)))
		}
	}
	sort.Strings(paths)
	if len(paths) > 3 {
		paths = append(paths[:3], fmt.Sprintf("and %d more", len(paths)-3))
	}
	msg := "the chat template does more with a number or null than print it, and the Go template engine would print it unlike transformers: " +
		strings.Join(paths, ", ") + "; write such values as integers or strings in the tool's schema or the template kwargs"
	if errors.Is(err, errRaised) {
		return fmt.Errorf("%s (%w)", msg, err)
	}
	return errors.New(msg)
}

func printedGo(h hole) string {
	if h.goText == "" {
		return `""`
	}
	return h.goText
}

func (t *ChatTemplate) render(messages []Message, tools Tools, addGen bool, kwargs Kwargs, marked bool) (string, error) {
	now := time.Now()
	if t.Now != nil {
		now = t.Now()
	}
	zone, offset := now.Zone()
	req := &renderRequest{Messages: messages, AddGen: addGen, Marked: marked, Now: now.UnixNano(), Zone: zone, Offset: offset}
	if tools.v != nil {
		req.ToolsID, req.toolsRaw, req.ToolsPrefix = tools.id, tools.raw, tools.v.prefix
	}
	if kwargs.v != nil {
		req.Kwargs, req.KwargsPrefix = kwargs.raw, kwargs.v.prefix
	}
	return t.pool.render(req)
}

// strftime formats tm as Python's (C locale) strftime does for the
// directives chat templates use.
func strftime(tm time.Time, format string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		pad := true // %-d (glibc): no leading zero
		if format[i] == '-' && i+1 < len(format) {
			pad, i = false, i+1
		}
		num := func(n, width int) {
			if pad {
				fmt.Fprintf(&b, "%0*d", width, n)
			} else {
				fmt.Fprintf(&b, "%d", n)
			}
		}
		switch format[i] {
		case 'Y':
			fmt.Fprintf(&b, "%d", tm.Year())
		case 'y':
			num(tm.Year()%100, 2)
		case 'm':
			num(int(tm.Month()), 2)
		case 'd':
			num(tm.Day(), 2)
		case 'e':
			fmt.Fprintf(&b, "%2d", tm.Day())
		case 'j':
			num(tm.YearDay(), 3)
		case 'H':
			num(tm.Hour(), 2)
		case 'I':
			num((tm.Hour()+11)%12+1, 2)
		case 'M':
			num(tm.Minute(), 2)
		case 'S':
			num(tm.Second(), 2)
		case 'p':
			b.WriteString(tm.Format("PM"))
		case 'B':
			b.WriteString(tm.Month().String())
		case 'b', 'h':
			b.WriteString(tm.Month().String()[:3])
		case 'A':
			b.WriteString(tm.Weekday().String())
		case 'a':
			b.WriteString(tm.Weekday().String()[:3])
		case 'w':
			fmt.Fprintf(&b, "%d", int(tm.Weekday()))
		case 'Z':
			b.WriteString(tm.Format("MST"))
		case 'z':
			b.WriteString(tm.Format("-0700"))
		case '%':
			b.WriteByte('%')
		default:
			return "", fmt.Errorf("strftime_now: the directive %%%c is not supported", format[i])
		}
	}
	return b.String(), nil
}
