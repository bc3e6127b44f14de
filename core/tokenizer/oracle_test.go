package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dlclark/regexp2"

	"github.com/agentenv/agentenv/core/tokenizer/tokenizertest"
)

type expectedFile struct {
	Model string `json:"model"`
	Cases []struct {
		Text string `json:"text"`
		IDs  []int  `json:"ids"`
	} `json:"cases"`
}

func readExpected(t *testing.T, model string) expectedFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "expected", model+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var e expectedFile
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatal(err)
	}
	if len(e.Cases) < 200 {
		t.Fatalf("%s: only %d cases", model, len(e.Cases))
	}
	return e
}

// TestMatchesHuggingFace encodes every committed string with the real Qwen3
// and Llama-3 tokenizer.json files and compares with the ids HF's tokenizers
// gave (testdata/gen.mjs). Both pattern paths run: the hand-written matcher
// and regexp2.
func TestMatchesHuggingFace(t *testing.T) {
	for _, model := range []string{"qwen3", "llama3"} {
		exp := readExpected(t, model)
		fast := loadModel(t, model)
		if _, ok := fast.steps[0].(*splitStep).find.(llamaFinder); !ok {
			t.Fatalf("%s: the hand-written matcher is not in use", model)
		}
		for name, tok := range map[string]*Tokenizer{"fast": fast, "regexp2": withRegexp2(t, fast)} {
			t.Run(model+"/"+name, func(t *testing.T) {
				bad := 0
				for _, c := range exp.Cases {
					if name == "regexp2" && hasFoldSpecial(c.Text) {
						continue // regexp2 does not fold 'ſ' to 's' as Oniguruma does (pattern.go)
					}
					got := encodeOf(t, tok, c.Text)
					if !equalIDs(got, c.IDs) {
						bad++
						if bad <= 10 {
							t.Errorf("%q:\n got %v\nwant %v", c.Text, got, c.IDs)
						}
					}
					if n := countOf(t, tok, c.Text); n != len(c.IDs) {
						t.Errorf("Count(%q) = %d, want %d", c.Text, n, len(c.IDs))
					}
				}
				if bad > 0 {
					t.Errorf("%d of %d strings differ from Hugging Face", bad, len(exp.Cases))
				}
			})
		}
	}
}

var (
	modelsMu sync.Mutex
	models   = map[string]*Tokenizer{}
)

// loadModel loads a real tokenizer from the oracle folder once for all tests
// (loading 11 MB of JSON is slow under -race).
func loadModel(t *testing.T, model string) *Tokenizer {
	t.Helper()
	dir := map[string]func(testing.TB) string{"qwen3": tokenizertest.Qwen3Dir, "llama3": tokenizertest.Llama3Dir}[model](t)
	modelsMu.Lock()
	defer modelsMu.Unlock()
	if tok, ok := models[model]; ok {
		return tok
	}
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	models[model] = tok
	return tok
}

// withRegexp2 is tok with its hand-written pattern matchers replaced by
// regexp2 running the same patterns.
func withRegexp2(t *testing.T, tok *Tokenizer) *Tokenizer {
	t.Helper()
	c := *tok
	c.steps = nil
	for _, s := range tok.steps {
		if sp, ok := s.(*splitStep); ok {
			if f, ok := sp.find.(llamaFinder); ok {
				cp := *sp
				cp.find = regexp2Finder(t, llamaPattern(f.digits))
				s = &cp
			}
		}
		c.steps = append(c.steps, s)
	}
	return &c
}

func regexp2Finder(t *testing.T, pattern string) finder {
	t.Helper()
	re, err := regexp2.Compile(pattern, regexp2.None)
	if err != nil {
		t.Fatal(err)
	}
	return regexFinder{re: re}
}

// hasFoldSpecial reports whether s holds a rune that case-folds onto an
// ASCII letter of another code point (ſ, the Kelvin sign).
func hasFoldSpecial(s string) bool { return strings.ContainsAny(s, "ſ\u212a") }

func equalIDs(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestExpectedIDsAreCurrent re-runs the reference tokenizers on the committed
// strings, so the expected ids cannot drift from what they give.
func TestExpectedIDsAreCurrent(t *testing.T) {
	dir := tokenizertest.Oracle(t)
	out := tokenizertest.Node(t, filepath.Join("testdata", "gen.mjs"), dir, "--check")
	t.Logf("%s", out)
}
