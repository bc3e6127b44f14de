package skyrl

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/dataset/skyrl/oracles"
)

// goldenNow is the clock of render_goldens.py's strftime_now.
var goldenNow = time.Date(2026, 3, 7, 9, 5, 2, 0, time.Local)

type goldenCase struct {
	Name     string
	Template string
	Messages []Message
	Tools    json.RawMessage
	Kwargs   json.RawMessage
}

type golden struct {
	Render              string `json:"render"`
	RenderNoKwargs      string `json:"render_no_kwargs"`
	RenderError         string `json:"render_error"`
	RenderNoKwargsError string `json:"render_no_kwargs_error"`
}

// readTokenizerConfig reads what TokenizerConfig needs from a
// tokenizer_config.json (the tests' own reader; the CLI uses the
// tokenizer package's).
func readTokenizerConfig(t testing.TB, path string) TokenizerConfig {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	tok := func(k string) string {
		var s string
		if json.Unmarshal(raw[k], &s) == nil {
			return s
		}
		var d struct{ Content string }
		json.Unmarshal(raw[k], &d)
		return d.Content
	}
	return TokenizerConfig{ChatTemplate: tok("chat_template"), BOSToken: tok("bos_token"), EOSToken: tok("eos_token"), PadToken: tok("pad_token"), UnkToken: tok("unk_token")}
}

func qwen3Template(t testing.TB) *ChatTemplate {
	t.Helper()
	tmpl, err := NewChatTemplate(readTokenizerConfig(t, filepath.Join(oracles.Qwen3Dir(t), "tokenizer_config.json")))
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// ownTemplate compiles one of testdata's templates with the special
// tokens render_goldens.py gives them.
func ownTemplate(t testing.TB, file string) *ChatTemplate {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := NewChatTemplate(TokenizerConfig{ChatTemplate: string(src), BOSToken: "<s>", EOSToken: "</s>"})
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func goldenCases(t testing.TB) ([]goldenCase, map[string]golden) {
	t.Helper()
	var cases []goldenCase
	var gold map[string]golden
	for file, v := range map[string]any{"cases.json": &cases, "golden.json": &gold} {
		b, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	return cases, gold
}

func parseCase(t testing.TB, c goldenCase) (Tools, Kwargs) {
	t.Helper()
	var tools Tools
	if len(c.Tools) > 0 && string(c.Tools) != "null" {
		var err error
		if tools, err = ParseTools(c.Tools, "tools"); err != nil {
			t.Fatal(err)
		}
	}
	kwargs, err := ParseKwargs(string(c.Kwargs))
	if err != nil {
		t.Fatal(err)
	}
	return tools, kwargs
}

// The Go engine renders every case byte for byte as Python's Jinja2 set
// up as transformers sets it up (golden.json, from render_goldens.py).
func TestRenderMatchesJinja2(t *testing.T) {
	templates := map[string]*ChatTemplate{"qwen3": qwen3Template(t), "coder": ownTemplate(t, "coder_layout.jinja"), "features": ownTemplate(t, "features.jinja")}
	for _, tmpl := range templates {
		tmpl.Now = func() time.Time { return goldenNow }
	}
	cases, gold := goldenCases(t)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			want, ok := gold[c.Name]
			if !ok {
				t.Fatal("no golden: run render_goldens.py")
			}
			tools, kwargs := parseCase(t, c)
			for _, r := range []struct {
				kwargs          Kwargs
				want, wantError string
			}{{kwargs, want.Render, want.RenderError}, {Kwargs{}, want.RenderNoKwargs, want.RenderNoKwargsError}} {
				got, err := templates[c.Template].Render(c.Messages, tools, true, r.kwargs)
				if r.wantError != "" {
					if !errors.Is(err, errRaised) || !strings.HasSuffix(err.Error(), ": "+r.wantError) {
						t.Fatalf("got %q, %v; want the template's error %q", got, err, r.wantError)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if got != r.want {
					t.Fatalf("%s", Diff("Jinja2", r.want, "Go", got))
				}
			}
		})
	}
}

// golden.json is what render_goldens.py prints today: the goldens are
// Python's, not a copy of the Go output.
func TestGoldensAreJinja2s(t *testing.T) {
	py := oracles.PythonJinja2(t)
	cmd := exec.Command(py, filepath.Join("testdata", "render_goldens.py"), oracles.Qwen3Dir(t))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("render_goldens.py: %v\n%s", err, stderr.String())
	}
	committed, err := os.ReadFile(filepath.Join("testdata", "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, committed) {
		t.Fatalf("testdata/golden.json is stale: %s\nregenerate it with python3 testdata/render_goldens.py %s > testdata/golden.json",
			Diff("render_goldens.py", string(out), "golden.json", string(committed)), oracles.Qwen3Dir(t))
	}
}
