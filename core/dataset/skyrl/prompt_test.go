package skyrl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// Moving the tools into the system message renders, with and without the
// template kwargs, the very text Jinja2 renders with tools=.
func TestWithToolsMatchesJinja2(t *testing.T) {
	templates := map[string]*ChatTemplate{"qwen3": qwen3Template(t), "coder": ownTemplate(t, "coder_layout.jinja")}
	cases, gold := goldenCases(t)
	n := 0
	for _, c := range cases {
		tmpl := templates[c.Template]
		if tmpl == nil {
			continue
		}
		n++
		t.Run(c.Name, func(t *testing.T) {
			tools, kwargs := parseCase(t, c)
			p, err := tmpl.WithTools(c.Messages, tools, kwargs)
			if err != nil {
				t.Fatal(err)
			}
			if p.Text != gold[c.Name].Render {
				t.Fatalf("with kwargs: %s", Diff("Jinja2 tools=", gold[c.Name].Render, "the row", p.Text))
			}
			if p.FilterText != gold[c.Name].RenderNoKwargs {
				t.Fatalf("without kwargs: %s", Diff("Jinja2 tools=", gold[c.Name].RenderNoKwargs, "the row", p.FilterText))
			}
			rest := c.Messages
			if rest[0].Role == "system" {
				rest = rest[1:]
			}
			switch {
			case tools.Len() == 0 && !reflect.DeepEqual(p.Messages, c.Messages):
				t.Fatalf("no tools, but the messages changed: %v", p.Messages)
			case tools.Len() > 0 && (p.Messages[0].Role != "system" || !reflect.DeepEqual(p.Messages[1:], rest)):
				t.Fatalf("want the tools in a system message, the rest as it was: %v", p.Messages)
			}
			// And the row rendered as SkyRL renders it: no tools=.
			again, err := tmpl.Render(p.Messages, Tools{}, true, kwargs)
			if err != nil || again != gold[c.Name].Render {
				t.Fatalf("the row rendered again: %v", err)
			}
		})
	}
	if n < 8 {
		t.Fatalf("only %d cases", n)
	}
}

// The qwen3_coder layout, built here from shared/research/skyrl.md §6.3's
// rules on its own, is the system text the writer puts in the row.
func TestCoderLayoutIsResearchs(t *testing.T) {
	tmpl := ownTemplate(t, "coder_layout.jinja")
	cases, _ := goldenCases(t)
	for _, c := range cases {
		if c.Template != "coder" || len(c.Tools) == 0 {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			tools, _ := parseCase(t, c)
			p, err := tmpl.WithTools(c.Messages, tools, Kwargs{})
			if err != nil {
				t.Fatal(err)
			}
			sys := "You are Qwen, a helpful AI assistant that can interact with a computer to solve tasks."
			if c.Messages[0].Role == "system" {
				sys = c.Messages[0].Content
			}
			want := sys + coderTools(t, c.Tools)
			if p.Messages[0].Content != want {
				t.Fatalf("%s", Diff("§6.3", want, "the row's system text", p.Messages[0].Content))
			}
		})
	}
}

// onode is a JSON value with its keys in order (this test's own reader).
type onode struct {
	keys []string
	kids map[string]*onode
	list []*onode
	leaf any // string, bool, nil, json.Number
	kind byte
}

func readOrdered(t *testing.T, dec *json.Decoder) *onode {
	tok, err := dec.Token()
	if err != nil {
		t.Fatal(err)
	}
	switch tok {
	case json.Delim('{'):
		n := &onode{kind: '{', kids: map[string]*onode{}}
		for dec.More() {
			k, _ := dec.Token()
			n.keys = append(n.keys, k.(string))
			n.kids[k.(string)] = readOrdered(t, dec)
		}
		dec.Token()
		return n
	case json.Delim('['):
		n := &onode{kind: '['}
		for dec.More() {
			n.list = append(n.list, readOrdered(t, dec))
		}
		dec.Token()
		return n
	}
	return &onode{leaf: tok}
}

// pyJSON is json.dumps(ensure_ascii=False) of n; pyStr is str(n).
func pyJSON(n *onode) string {
	switch n.kind {
	case '{':
		var parts []string
		for _, k := range n.keys {
			kb, _ := json.Marshal(k)
			parts = append(parts, string(kb)+": "+pyJSON(n.kids[k]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case '[':
		var parts []string
		for _, e := range n.list {
			parts = append(parts, pyJSON(e))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	switch v := n.leaf.(type) {
	case nil:
		return "null"
	case json.Number:
		return pyNumber(v)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(n.leaf)
	return strings.TrimSuffix(b.String(), "\n")
}

func pyNumber(v json.Number) string {
	if strings.ContainsAny(string(v), ".eE") {
		f, _ := v.Float64()
		return pyFloatRepr(f)
	}
	return string(v)
}

func pyStr(n *onode) string {
	switch n.kind {
	case '[':
		var parts []string
		for _, e := range n.list {
			if s, ok := e.leaf.(string); ok {
				parts = append(parts, "'"+s+"'")
			} else {
				parts = append(parts, pyStr(e))
			}
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	switch v := n.leaf.(type) {
	case nil:
		return "None"
	case bool:
		if v {
			return "True"
		}
		return "False"
	case json.Number:
		return pyNumber(v)
	case string:
		return v
	}
	return fmt.Sprint(n.leaf)
}

// coderTools is §6.3's TOOLS block.
func coderTools(t *testing.T, raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tools := readOrdered(t, dec)
	pyStrip := func(s string) string { return strings.TrimSpace(s) }
	extra := func(d *onode, handled ...string) string {
		var b strings.Builder
		for _, k := range d.keys {
			if strings.Contains(" "+strings.Join(handled, " ")+" ", " "+k+" ") {
				continue
			}
			v := d.kids[k]
			if v.kind == '{' || v.kind == '[' {
				b.WriteString("\n<" + k + ">" + pyJSON(v) + "</" + k + ">")
			} else {
				b.WriteString("\n<" + k + ">" + pyStr(v) + "</" + k + ">")
			}
		}
		return b.String()
	}
	var b strings.Builder
	b.WriteString("\n\n# Tools\n\nYou have access to the following functions:\n\n<tools>")
	for _, tool := range tools.list {
		fn := tool
		if f := tool.kids["function"]; f != nil {
			fn = f
		}
		b.WriteString("\n<function>\n<name>" + fn.kids["name"].leaf.(string) + "</name>")
		if d := fn.kids["description"]; d != nil {
			b.WriteString("\n<description>" + pyStrip(d.leaf.(string)) + "</description>")
		}
		b.WriteString("\n<parameters>")
		if params := fn.kids["parameters"]; params != nil && params.kind == '{' {
			if props := params.kids["properties"]; props != nil && props.kind == '{' {
				for _, name := range props.keys {
					p := props.kids[name]
					b.WriteString("\n<parameter>\n<name>" + name + "</name>")
					if ty := p.kids["type"]; ty != nil {
						b.WriteString("\n<type>" + pyStr(ty) + "</type>")
					}
					if d := p.kids["description"]; d != nil {
						b.WriteString("\n<description>" + pyStrip(d.leaf.(string)) + "</description>")
					}
					b.WriteString(extra(p, "name", "type", "description"))
					b.WriteString("\n</parameter>")
				}
			}
			b.WriteString(extra(params, "type", "properties"))
		}
		b.WriteString("\n</parameters>")
		b.WriteString(extra(fn, "type", "name", "description", "parameters"))
		b.WriteString("\n</function>")
	}
	b.WriteString("\n</tools>")
	b.WriteString("\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after\n- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT>")
	return b.String()
}

// Templates whose tools= text a system message cannot reproduce are
// refused, showing where the two differ.
func TestWithToolsRefusals(t *testing.T) {
	tools, err := ParseTools([]byte(`[{"type": "function", "function": {"name": "f", "parameters": {}}}]`), "tools")
	if err != nil {
		t.Fatal(err)
	}
	loop := `{% for m in messages %}{% if m.role != "system" %}<{{ m.role }}>{{ m.content }}{% if m.role == "user" and tools and loop.index0 == first_user %}[tools: {{ tools | tojson }}]{% endif %}</{{ m.role }}>{% endif %}{% endfor %}`
	for _, c := range []struct {
		name, tmpl string
		msgs       []Message
		is         error
		want       string
	}{{
		// As Llama 3.1 does: the tools go in the first user message.
		name: "tools in the user turn",
		tmpl: `{% set first_user = 1 if messages[0].role == "system" else 0 %}<system>{% if messages[0].role == "system" %}{{ messages[0].content }}{% endif %}</system>` + loop,
		msgs: []Message{{"system", "S"}, {"user", "U"}},
		is:   ErrToolsOutsideSystem,
		want: `(after the system text): they differ at byte 25 (line 1) of tools='s text, byte 53 of a system message's: tools= gives …"<system>S</system><user>U[tools: `,
	}, {
		name: "tools before the system turn",
		tmpl: `{% if tools %}[{{ tools | length }} tools]{% endif %}<system>{{ messages[0].content }}</system>{% for m in messages[1:] %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}`,
		msgs: []Message{{"system", "S"}, {"user", "U"}},
		is:   ErrToolsOutsideSystem,
		want: `(before the system text): they differ at byte 0 (line 1) of tools='s text, byte 0 of a system message's: tools= gives …"[1 tools]<system>S`,
	}, {
		name: "system text trimmed only without tools",
		tmpl: `<system>{% if tools %}{{ messages[0].content }}{{ "\n" ~ (tools | tojson) }}{% else %}{{ messages[0].content | trim }}{% endif %}</system>{% for m in messages[1:] %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}`,
		msgs: []Message{{"system", "  S"}, {"user", "U"}},
		is:   ErrRenderMismatch,
		want: `they differ at byte 8 (line 1) of tools='s text, byte 8 of the system message's: tools= gives …"<system>  S\n[{`,
	}, {
		name: "system text not printed",
		tmpl: `{% if tools %}<tools>{% endif %}{% for m in messages %}{% if m.role == "user" %}{{ m.content }}{% endif %}{% endfor %}`,
		msgs: []Message{{"user", "U"}},
		want: "does not print the system message's text once as it is",
	}} {
		t.Run(c.name, func(t *testing.T) {
			tmpl, err := NewChatTemplate(TokenizerConfig{ChatTemplate: c.tmpl})
			if err != nil {
				t.Fatal(err)
			}
			_, err = tmpl.WithTools(c.msgs, tools, Kwargs{})
			if err == nil || (c.is != nil && !errors.Is(err, c.is)) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant %v with %q", err, c.is, c.want)
			}
		})
	}
}
