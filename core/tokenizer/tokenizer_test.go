package tokenizer

import (
	"encoding/json"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/agentenv/agentenv/core/tokenizer/tokenizertest"
)

// tinyJSON is a small byte-level tokenizer.json: byte b has id b, the merges
// given add ids from 256 on, and mutate may change any part.
func tinyJSON(t *testing.T, merges [][2]string, mutate func(top, model map[string]any)) []byte {
	t.Helper()
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	for _, m := range merges {
		if _, ok := vocab[m[0]+m[1]]; !ok {
			vocab[m[0]+m[1]] = len(vocab)
		}
	}
	model := map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
		"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
		"vocab": vocab, "merges": merges}
	top := map[string]any{
		"version": "1.0", "normalizer": map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": llamaPattern(1)}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"added_tokens": []any{map[string]any{"id": 1000, "content": "<|x|>", "special": true, "normalized": false,
			"lstrip": false, "rstrip": false, "single_word": false}},
		"model": model,
	}
	if mutate != nil {
		mutate(top, model)
	}
	data, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

var tinyMerges = [][2]string{{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"Ġ", "w"}, {"o", "r"}, {"Ġw", "or"}}

func TestEncodeTiny(t *testing.T) {
	tok, err := FromJSON(tinyJSON(t, tinyMerges, nil))
	if err != nil {
		t.Fatal(err)
	}
	id := func(s string) int { i, ok := tok.TokenID(s); require(t, ok, "no token %q", s); return i }
	tests := []struct {
		text string
		want []int
	}{
		{"hello", []int{id("hello")}},
		{"hello world", []int{id("hello"), id("Ġwor"), 'l', 'd'}},
		{"<|x|>hello", []int{263, id("hello")}}, // HF numbers it after the 263 vocab entries, not 1000 as written
		{"", nil},
		{"a\xffb", []int{'a', 0xEF, 0xBF, 0xBD, 'b'}}, // a bad byte reads as U+FFFD
		{"e\u0301", []int{0xC3, 0xA9}},                // NFC first: é
	}
	for _, tt := range tests {
		got := encodeOf(t, tok, tt.text)
		if !equalIDs(got, tt.want) {
			t.Errorf("Encode(%q) = %v, want %v", tt.text, got, tt.want)
		}
		if n := countOf(t, tok, tt.text); n != len(tt.want) {
			t.Errorf("Count(%q) = %d, want %d", tt.text, n, len(tt.want))
		}
	}
	if got, err := tok.Decode(encodeOf(t, tok, "<|x|>hello world")); err != nil || got != "<|x|>hello world" {
		t.Errorf("Decode = %q, %v", got, err)
	}
	if _, err := tok.Decode([]int{99999}); err == nil || !strings.Contains(err.Error(), "99999") {
		t.Errorf("Decode of an unknown id: %v", err)
	}
	if tok.VocabSize() != 264 {
		t.Errorf("VocabSize = %d, want 264", tok.VocabSize())
	}
}

func require(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Fatalf(format, args...)
	}
}

// TestRefusesWhatItCannotRunExactly: each unsupported or broken part of a
// tokenizer.json is refused, naming it.
func TestRefusesWhatItCannotRunExactly(t *testing.T) {
	pre := func(v any) func(top, _ map[string]any) {
		return func(top, _ map[string]any) { top["pre_tokenizer"] = v }
	}
	tests := []struct {
		name   string
		mutate func(top, model map[string]any)
		want   string
	}{
		{"wordpiece", func(top, m map[string]any) { m["type"] = "WordPiece" }, `model type "WordPiece" is not supported`},
		{"unigram", func(top, m map[string]any) {
			top["model"] = map[string]any{"type": "Unigram", "vocab": [][]any{{"a", -1.0}}}
		}, `model type "Unigram" is not supported`},
		{"lowercase", func(top, _ map[string]any) { top["normalizer"] = map[string]any{"type": "Lowercase"} }, `normalizer "Lowercase" is not supported`},
		{"nested normalizer", func(top, _ map[string]any) {
			top["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFC"}, map[string]any{"type": "Prepend", "prepend": "▁"}}}
		}, `Sequence[1]: normalizer "Prepend" is not supported`},
		{"metaspace", pre(map[string]any{"type": "Metaspace", "replacement": "▁"}), `pre-tokenizer "Metaspace" is not supported`},
		{"no byte level", pre(map[string]any{"type": "Split", "pattern": map[string]any{"String": " "}, "behavior": "Isolated", "invert": false}), "no ByteLevel step"},
		{"no pre-tokenizer", pre(nil), "no ByteLevel step"},
		{"bad behavior", pre(map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": "a"}, "behavior": "Sideways"}, map[string]any{"type": "ByteLevel"}}}),
			`behavior "Sideways" is not one of Contiguous, Isolated`},
		{"bad regex", pre(map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": "(unclosed"}, "behavior": "Isolated"}, map[string]any{"type": "ByteLevel"}}}),
			`regex "(unclosed"`},
		{"dropout", func(_, m map[string]any) { m["dropout"] = 0.1 }, "dropout 0.1 makes encoding random"},
		{"byte fallback", func(_, m map[string]any) { m["byte_fallback"] = true }, `byte_fallback "true" is not supported`},
		{"subword prefix", func(_, m map[string]any) { m["continuing_subword_prefix"] = "##" }, `continuing_subword_prefix "##" is not supported`},
		{"merge of unknown", func(_, m map[string]any) { m["merges"] = [][2]string{{"h", "ZZ"}} }, `merge 1 ("h" "ZZ"): "ZZ" is not in the vocab`},
		{"merged not in vocab", func(_, m map[string]any) {
			m["merges"] = []string{"#version: 0.2", "h e", "x y"}
		}, `merge 2 ("x" "y"): the merged token "xy" is not in the vocab`},
		{"bad legacy merge", func(_, m map[string]any) { m["merges"] = []string{"h e x"} }, "not two tokens"},
		{"unk not in vocab", func(_, m map[string]any) { m["unk_token"] = "<unk>" }, `unk_token "<unk>" is not in the vocab`},
		{"version", func(top, _ map[string]any) { top["version"] = "2.0" }, `version "2.0" is not supported`},
		{"no model", func(top, _ map[string]any) { delete(top, "model") }, "has no model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromJSON(tinyJSON(t, tinyMerges, tt.mutate))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to say %q", err, tt.want)
			}
		})
	}
	if _, err := FromJSON([]byte("{not json")); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("bad JSON: %v", err)
	}
}

// TestLegacyMergesAndIgnoreMerges: merges written as "a b" lines read as
// pairs do; with ignore_merges a word in the vocab is one token even when
// the merges would not build it.
func TestLegacyMergesAndIgnoreMerges(t *testing.T) {
	pairs, err := FromJSON(tinyJSON(t, tinyMerges, nil))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := FromJSON(tinyJSON(t, tinyMerges, func(_, m map[string]any) {
		var l []string
		for _, p := range tinyMerges {
			l = append(l, p[0]+" "+p[1])
		}
		m["merges"] = l
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"hello world", "hell or hello", "world"} {
		if a, b := encodeOf(t, pairs, s), encodeOf(t, lines, s); !equalIDs(a, b) {
			t.Errorf("%q: pairs %v, lines %v", s, a, b)
		}
	}
	ignore, err := FromJSON(tinyJSON(t, tinyMerges, func(_, m map[string]any) {
		m["ignore_merges"] = true
		m["vocab"].(map[string]int)["dog"] = 2000
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := encodeOf(t, ignore, "dog"); !equalIDs(got, []int{2000}) {
		t.Errorf("ignore_merges: %v", got)
	}
	if got := encodeOf(t, pairs, "dog"); len(got) != 3 {
		t.Errorf("without ignore_merges: %v", got)
	}
}

func TestSplitSpecialTokens(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, TokenizerFile), string(tinyJSON(t, tinyMerges, nil)))
	tok, err := Load(dir) // no tokenizer_config.json: fine
	if err != nil {
		t.Fatal(err)
	}
	if got := encodeOf(t, tok, "<|x|>"); !equalIDs(got, []int{263}) {
		t.Errorf("special token: %v", got)
	}
	writeFile(t, filepath.Join(dir, ConfigFile), `{"split_special_tokens": true}`)
	if tok, err = Load(dir); err != nil {
		t.Fatal(err)
	}
	if got := encodeOf(t, tok, "<|x|>"); len(got) != 5 {
		t.Errorf("split_special_tokens: %v, want the 5 bytes", got)
	}
	writeFile(t, filepath.Join(dir, ConfigFile), `{"split_special_tokens": tru`)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), ConfigFile) {
		t.Errorf("bad config: %v", err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentEncode: many goroutines encoding at once (run with -race)
// get what one goroutine gets; the word cache is shared by all.
func TestConcurrentEncode(t *testing.T) {
	tok := loadModel(t, "qwen3")
	exp := readExpected(t, "qwen3")
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := range exp.Cases {
				c := exp.Cases[(i*7+g*13)%len(exp.Cases)]
				if got, err := tok.Encode(c.Text); err != nil || !equalIDs(got, c.IDs) {
					t.Errorf("goroutine %d, %q: %v, %v", g, c.Text, got, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}

// TestDecodeRoundTrip: decoding gives back the normalized text.
func TestDecodeRoundTrip(t *testing.T) {
	tok := loadModel(t, "qwen3")
	for _, c := range readExpected(t, "qwen3").Cases {
		got, err := tok.Decode(c.IDs)
		if err != nil {
			t.Fatal(err)
		}
		if want := norm.NFC.String(c.Text); got != want {
			t.Errorf("Decode(Encode(%q)) = %q", c.Text, got)
		}
	}
	if id, ok := tok.TokenID("<|im_end|>"); !ok || id != 151645 {
		t.Errorf("TokenID(<|im_end|>) = %d, %v", id, ok)
	}
	if id, ok := tok.TokenID("Ġworld"); !ok || id != 1879 {
		t.Errorf("TokenID(Ġworld) = %d, %v", id, ok)
	}
}

// TestFastPatternMatchesRegexp2 compares the hand-written matcher with
// regexp2 running the same pattern, on random text from an alphabet of the
// characters the pattern cares about (apart from 'ſ' and the Kelvin sign,
// which regexp2 does not fold as Oniguruma does).
func TestFastPatternMatchesRegexp2(t *testing.T) {
	alphabet := []string{"a", "Z", "é", "中", "ǅ", "'", "'s", "'LL", "'Re", "'D", "1", "٣", "Ⅻ", "½", " ", "  ",
		"\t", "\n", "\r", "\r\n", "\u00a0", "\u3000", "\u2028", "\u0085", ".", "!", "😀", "\u0301", "\u200d", "-", "_"}
	r := rand.New(rand.NewPCG(1, 2))
	for _, digits := range []int{1, 3} {
		fast := llamaFinder{digits: digits}
		slow := regexp2Finder(t, llamaPattern(digits))
		for i := 0; i < 3000; i++ {
			var b strings.Builder
			for n := r.IntN(20); n >= 0; n-- {
				b.WriteString(alphabet[r.IntN(len(alphabet))])
			}
			s := b.String()
			if a, b := spans(fast, s), spans(slow, s); a != b {
				t.Fatalf("digits %d, %q:\nfast    %s\nregexp2 %s", digits, s, a, b)
			}
		}
	}
}

func spans(f finder, s string) string {
	var b strings.Builder
	f.matches(s, func(start, end int) { b.WriteString(strings.ReplaceAll(s[start:end], "\n", `\n`) + "|") })
	return b.String()
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name, json     string
		want           Config
		wantNamed, err string
	}{
		{"string template", `{"chat_template": "{{ x }}", "bos_token": null, "eos_token": "<|im_end|>"}`,
			Config{ChatTemplate: "{{ x }}", TemplateSource: ConfigFile, EOSToken: "<|im_end|>"}, "", ""},
		{"added token objects", `{"bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false}, "eos_token": {"content": "</s>"}}`,
			Config{BOSToken: "<s>", EOSToken: "</s>"}, "", ""},
		{"named templates", `{"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]}`,
			Config{ChatTemplate: "D", TemplateSource: ConfigFile}, "tool_use=T", ""},
		{"split special", `{"split_special_tokens": true}`, Config{SplitSpecialTokens: true}, "", ""},
		{"bad template", `{"chat_template": 3}`, Config{}, "", "chat_template is neither a string nor a list"},
		{"bad token", `{"eos_token": 3}`, Config{}, "", "eos_token: want a string or an object"},
		{"not json", `{`, Config{}, "", "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tt.json))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			named := c.ChatTemplates
			if c.ChatTemplate != tt.want.ChatTemplate || c.TemplateSource != tt.want.TemplateSource ||
				c.BOSToken != tt.want.BOSToken || c.EOSToken != tt.want.EOSToken || c.SplitSpecialTokens != tt.want.SplitSpecialTokens {
				t.Errorf("got %+v, want %+v", *c, tt.want)
			}
			if tt.wantNamed != "" {
				k, v, _ := strings.Cut(tt.wantNamed, "=")
				if named[k] != v || named["default"] != tt.want.ChatTemplate {
					t.Errorf("named templates %v", named)
				}
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadConfig(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing config: %v", err)
	}
	writeFile(t, filepath.Join(dir, ConfigFile), `{"chat_template": "from config", "eos_token": "<|im_end|>"}`)
	c, err := LoadConfig(dir)
	if err != nil || c.ChatTemplate != "from config" || c.TemplateSource != ConfigFile {
		t.Fatalf("%+v, %v", c, err)
	}
	writeFile(t, filepath.Join(dir, ChatTemplateFile), "from jinja")
	c, err = LoadConfig(dir)
	if err != nil || c.ChatTemplate != "from jinja" || c.TemplateSource != ChatTemplateFile || c.EOSToken != "<|im_end|>" {
		t.Fatalf("%+v, %v", c, err)
	}
}

// TestQwen3Config reads the real Qwen3 tokenizer_config.json.
func TestQwen3Config(t *testing.T) {
	c, err := LoadConfig(tokenizertest.Qwen3Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.EOSToken != "<|im_end|>" || c.BOSToken != "" || !strings.Contains(c.ChatTemplate, "<|im_start|>") {
		t.Errorf("eos %q bos %q template %.60q", c.EOSToken, c.BOSToken, c.ChatTemplate)
	}
}

// encodeOf is tok.Encode(s), failing the test on an error.
func encodeOf(t testing.TB, tok *Tokenizer, s string) []int {
	t.Helper()
	ids, err := tok.Encode(s)
	if err != nil {
		t.Fatalf("Encode(%.40q): %v", s, err)
	}
	return ids
}

// countOf is tok.Count(s), failing the test on an error.
func countOf(t testing.TB, tok *Tokenizer, s string) int {
	t.Helper()
	n, err := tok.Count(s)
	if err != nil {
		t.Fatalf("Count(%.40q): %v", s, err)
	}
	return n
}
