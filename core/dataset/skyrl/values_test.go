package skyrl

import (
	"math"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/dataset/skyrl/oracles"
)

func TestPyFloatRepr(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{
		{1, "1.0"}, {-0.0 * -1, "0.0"}, {math.Copysign(0, -1), "-0.0"}, {0.1, "0.1"}, {2.5, "2.5"},
		{1e-4, "0.0001"}, {1e-5, "1e-05"}, {1.5e-7, "1.5e-07"}, {123.0, "123.0"}, {1234567.0, "1234567.0"},
		{1e15, "1000000000000000.0"}, {1e16, "1e+16"}, {1.2345678901234568e+17, "1.2345678901234568e+17"},
		{1.5e300, "1.5e+300"}, {5e-324, "5e-324"}, {math.MaxFloat64, "1.7976931348623157e+308"},
		{0.30000000000000004, "0.30000000000000004"}, {-2.75, "-2.75"}, {9999999999999998.0, "9999999999999998.0"},
	} {
		if got := pyFloatRepr(c.f); got != c.want {
			t.Errorf("pyFloatRepr(%v) = %s, want %s", c.f, got, c.want)
		}
	}
}

// pyFloatRepr agrees with Python's repr on 2,000 floats across the range.
func TestPyFloatReprMatchesPython(t *testing.T) {
	py := oracles.PythonJinja2(t)
	r := rand.New(rand.NewPCG(1, 2))
	var in []string
	var fs []float64
	for i := range 2000 {
		var f float64
		switch i % 4 {
		case 0:
			f = math.Float64frombits(r.Uint64())
		case 1:
			f = float64(r.IntN(1_000_000)) * math.Pow(10, float64(r.IntN(40)-20))
		case 2:
			f = r.NormFloat64() * math.Pow(10, float64(r.IntN(30)-10))
		default:
			f = float64(r.Int64N(1<<54)) / 8
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		fs = append(fs, f)
		in = append(in, strconv.FormatUint(math.Float64bits(f), 16))
	}
	cmd := exec.Command(py, "-c", `import struct, sys
for line in sys.stdin:
    print(repr(struct.unpack("<d", int(line, 16).to_bytes(8, "little"))[0]))`)
	cmd.Stdin = strings.NewReader(strings.Join(in, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(want) != len(fs) {
		t.Fatalf("python printed %d lines for %d floats", len(want), len(fs))
	}
	for i, f := range fs {
		if got := pyFloatRepr(f); got != want[i] {
			t.Errorf("pyFloatRepr(%b) = %s, Python %s", f, got, want[i])
		}
	}
}

func TestParseJSONValue(t *testing.T) {
	v, err := parseJSONValue([]byte(`{"b": 1, "a": [2.0, null, "x"], "b": 3, "c": {"z": true, "y": 1e2}}`), "doc")
	if err != nil {
		t.Fatal(err)
	}
	d := v.plain.AsDict()
	// Python's dict from json.loads: a repeated key keeps its first place
	// and its last value.
	if strings.Join(d.Keys, ",") != "b,a,c" || d.Data["b"].AsInt() != 3 {
		t.Fatalf("keys %v, b = %v", d.Keys, d.Data["b"])
	}
	if a := d.Data["a"].AsList().Items; !a[0].IsFloat() || !a[1].IsNone() || a[2].AsString() != "x" {
		t.Fatalf("a = %v", d.Data["a"])
	}
	if y := d.Data["c"].AsDict().Data["y"]; !y.IsFloat() || y.AsFloat() != 100 {
		t.Fatalf("1e2 = %v, want the float 100.0 (as json.loads reads it)", y)
	}
	// 2.0 prints unlike Python, and so does null; 1e2 (Go 100, Python
	// 100.0) too: three holes.
	if len(v.holes) != 3 {
		t.Fatalf("%d holes: %v", len(v.holes), v.holes)
	}
	for _, c := range []struct{ in, want string }{
		{`{"n": 9223372036854775808}`, "does not fit in 64 bits"},
		{`{"n": 1e400}`, "out of a float's range"},
		{`{"n": }`, "not valid JSON"},
		{`[1] [2]`, "more than one JSON value"},
	} {
		if _, err := parseJSONValue([]byte(c.in), "doc"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.in, err, c.want)
		}
	}
}

func TestParseKwargsAndTools(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`[1]`, "want a JSON object"},
		{`{"tools": []}`, `"tools" is apply_chat_template's own argument`},
		{`{"enable_thinking": false`, "not valid JSON"},
	} {
		if _, err := ParseKwargs(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseKwargs(%s): got %v, want %q", c.in, err, c.want)
		}
	}
	if k, err := ParseKwargs(" "); err != nil || k.v != nil {
		t.Fatalf("blank kwargs: %v %v", k, err)
	}
	tools, err := ParseTools([]byte(`[{"type": "function", "function": {"name": "a"}}, {"name": "b", "parameters": {}}]`), "tools")
	if err != nil || strings.Join(tools.Names(), ",") != "a,b" {
		t.Fatalf("names %v, %v", tools.Names(), err)
	}
	for _, in := range []string{`{"name": "a"}`, `[{"type": "function", "function": {"description": "x"}}]`, `[3]`} {
		if _, err := ParseTools([]byte(in), "tools"); err == nil {
			t.Errorf("ParseTools(%s): no error", in)
		}
	}
}

// A template that does more with a float than print it is refused,
// naming the value, rather than printing it as Go would.
func TestRenderRefusesComputedHoles(t *testing.T) {
	tmpl, err := NewChatTemplate(TokenizerConfig{ChatTemplate: `{{ (scale * 2) }}{% for m in messages %}{{ m.content }}{% endfor %}`})
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParseKwargs(`{"scale": 1.5}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmpl.Render([]Message{{Role: "user", Content: "hi"}}, Tools{}, true, k); err != nil {
		t.Fatalf("1.5 prints alike in both: %v", err)
	}
	k, _ = ParseKwargs(`{"scale": 2.0}`)
	_, err = tmpl.Render([]Message{{Role: "user", Content: "hi"}}, Tools{}, true, k)
	if err == nil || !strings.Contains(err.Error(), "chat template kwargs.scale (transformers prints 2.0, the Go template engine 2)") {
		t.Fatalf("got %v", err)
	}
}

// U+2028 in a string that the template also holds as the text \u2028
// cannot be told apart: refused.
func TestRenderRefusesAmbiguousLineSeparator(t *testing.T) {
	tmpl, err := NewChatTemplate(TokenizerConfig{ChatTemplate: `{{ tools | tojson }}{% for m in messages %}{{ m.content }}{% endfor %}`})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := ParseTools([]byte("[{\"name\": \"a\", \"description\": \"x\u2028y\"}]"), "tools")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render([]Message{{Role: "user", Content: "plain"}}, tools, true, Kwargs{})
	if err != nil || got != "[{\"name\": \"a\", \"description\": \"x\u2028y\"}]plain" {
		t.Fatalf("got %q, %v", got, err)
	}
	_, err = tmpl.Render([]Message{{Role: "user", Content: `the text \u2028`}}, tools, true, Kwargs{})
	if err == nil || !strings.Contains(err.Error(), "U+2028") {
		t.Fatalf("got %v", err)
	}
	// The text alone, with no U+2028 anywhere, is no problem.
	got, err = tmpl.Render([]Message{{Role: "user", Content: `the text \u2028`}}, Tools{}, true, Kwargs{})
	if err != nil || got != `nullthe text \u2028` {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestStrftime(t *testing.T) {
	got, err := strftime(goldenNow, "%Y-%m-%d %H:%M:%S %a %A %b %B %j %y %I%p %-d %e %w %%")
	if err != nil || got != "2026-03-07 09:05:02 Sat Saturday Mar March 066 26 09AM 7  7 6 %" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := strftime(goldenNow, "%Q"); err == nil {
		t.Fatal("%Q: no error")
	}
}

func TestHasLineSep(t *testing.T) {
	for _, c := range []struct {
		s            string
		sep, escaped bool
	}{
		{"", false, false}, {"plain é → text", false, false}, {"a\u2028b", true, false}, {"\u2029", true, false},
		{"\u2027\u202a", false, false}, {`the text \u2028`, false, true}, {`\\u2029 end`, false, true}, {`\u20288`, false, true},
		{`\u202`, false, false}, {"\xe2\x80", false, false},
	} {
		if hasLineSep(c.s) != c.sep || hasLineSepEscape(c.s) != c.escaped {
			t.Errorf("%q: got %v %v, want %v %v", c.s, hasLineSep(c.s), hasLineSepEscape(c.s), c.sep, c.escaped)
		}
	}
}

// A template whose text holds \u2028 renders, so long as no value holds
// U+2028 itself.
func TestRenderTemplateWithEscapeText(t *testing.T) {
	tmpl, err := NewChatTemplate(TokenizerConfig{ChatTemplate: `text \u2028 {{ messages[0].content }}`})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render([]Message{{Role: "user", Content: "hi"}}, Tools{}, true, Kwargs{})
	if err != nil || got != `text \u2028 hi` {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := tmpl.Render([]Message{{Role: "user", Content: "a\u2029b"}}, Tools{}, true, Kwargs{}); err == nil {
		t.Fatal("U+2029 in the prompt and \\u2028 in the template: no error")
	}
}

// Tools that would cost minutes per prompt are refused at once: over
// MaxToolsBytes, nested past maxJSONDepth (200 KB nested 100,000 deep
// took almost 4 minutes, the square of the depth), and a long key over
// many values no longer costs its length per value.
func TestParseToolsBounds(t *testing.T) {
	tool := func(params string) []byte {
		return []byte(`[{"type": "function", "function": {"name": "f", "parameters": ` + params + `}}]`)
	}
	for _, c := range []struct {
		name string
		raw  []byte
		want string // "" parses
	}{
		{"over the size bound", tool(`{"description": "` + strings.Repeat("a", MaxToolsBytes) + `"}`), "bytes of tool schemas, over the bound of 2097152"},
		{"deep nesting", tool(strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)), "tools[0].function.parameters[0][0]"},
		{"at the depth bound", tool(strings.Repeat("[", maxJSONDepth-3) + strings.Repeat("]", maxJSONDepth-3)), ""},
		{"a long key over many holes", tool(`{"` + strings.Repeat("k", 1<<20) + `": [` + strings.Repeat("null, 1.0, ", 80_000) + `null]}`), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() { _, err := ParseTools(c.raw, "tools"); done <- err }()
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("ParseTools still running after a minute")
			}
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("err = %.300v, want %q", err, c.want)
			}
		})
	}
	_, err := ParseTools(tool(strings.Repeat("[", 300)+strings.Repeat("]", 300)), "tools")
	if err == nil || !strings.Contains(err.Error(), "nests deeper than 200 levels") {
		t.Errorf("err = %.300v", err)
	}
}
