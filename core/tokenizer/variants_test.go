package tokenizer

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/core/tokenizer/tokenizertest"
)

// TestComponentsMatchHuggingFace runs variants.json: small tokenizers made
// from the Qwen3 file with one component changed each (every Split behavior,
// inverted and empty-match patterns, ByteLevel's GPT-2 split and prefix
// space, each normal form, added tokens with lstrip/rstrip/single_word/
// normalized, ignore_merges, unknown bytes) and compares with the ids HF's
// Rust tokenizers gave for the same files (testdata/gen.mjs).
func TestComponentsMatchHuggingFace(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(tokenizertest.Qwen3Dir(t), TokenizerFile))
	if err != nil {
		t.Fatal(err)
	}
	base := parseBase(t, data)
	var spec struct {
		Variants []map[string]json.RawMessage `json:"variants"`
	}
	readJSON(t, filepath.Join("testdata", "variants.json"), &spec)
	var expected struct {
		Variants []struct {
			Name  string `json:"name"`
			Cases []struct {
				Text string `json:"text"`
				IDs  []int  `json:"ids"`
			} `json:"cases"`
		} `json:"variants"`
	}
	readJSON(t, filepath.Join("testdata", "expected", "variants.json"), &expected)
	if len(expected.Variants) != len(spec.Variants) {
		t.Fatalf("expected/variants.json has %d variants, variants.json %d: run testdata/gen.mjs", len(expected.Variants), len(spec.Variants))
	}
	for i, v := range spec.Variants {
		var name string
		_ = json.Unmarshal(v["name"], &name)
		exp := expected.Variants[i]
		t.Run(name, func(t *testing.T) {
			if exp.Name != name {
				t.Fatalf("expected/variants.json has %q here: run testdata/gen.mjs", exp.Name)
			}
			tok, err := FromJSON(smallTokenizer(t, base, v))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range exp.Cases {
				if got := encodeOf(t, tok, c.Text); !equalIDs(got, c.IDs) {
					t.Errorf("%q:\n got %v\nwant %v", c.Text, got, c.IDs)
				}
			}
		})
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// baseFile is the Qwen3 tokenizer.json, read once for all variants.
type baseFile struct {
	top, model map[string]json.RawMessage
	vocab      map[string]int
	merges     [][2]string
}

func parseBase(t *testing.T, data []byte) *baseFile {
	t.Helper()
	b := &baseFile{}
	if err := json.Unmarshal(data, &b.top); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b.top["model"], &b.model); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b.model["vocab"], &b.vocab); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b.model["merges"], &b.merges); err != nil {
		t.Fatal(err)
	}
	return b
}

// smallTokenizer is gen.mjs's smallTokenizer: the 256 byte tokens and the
// first 8000 merges of the Qwen3 file with their ids, less tokens holding a
// dropped byte, with the variant's components in place of Qwen3's.
func smallTokenizer(t *testing.T, base *baseFile, v map[string]json.RawMessage) []byte {
	t.Helper()
	top := maps.Clone(base.top)
	model := maps.Clone(base.model)
	vocab, merges := base.vocab, base.merges
	var drop []int
	if raw, ok := v["drop_bytes"]; ok {
		if err := json.Unmarshal(raw, &drop); err != nil {
			t.Fatal(err)
		}
	}
	dropped := ""
	for _, b := range drop {
		dropped += string(byteToRune[b])
	}
	keep := func(tok string) bool { return !strings.ContainsAny(tok, dropped) || dropped == "" }
	small := map[string]int{}
	for b := 0; b < 256; b++ {
		if c := string(byteToRune[b]); keep(c) {
			small[c] = vocab[c]
		}
	}
	var kept [][2]string
	for _, m := range merges[:8000] {
		_, okA := small[m[0]]
		_, okB := small[m[1]]
		if !okA || !okB || !keep(m[0]+m[1]) {
			continue
		}
		kept = append(kept, m)
		small[m[0]+m[1]] = vocab[m[0]+m[1]]
	}
	model["vocab"] = mustJSON(t, small)
	model["merges"] = mustJSON(t, kept)
	if raw, ok := v["model"]; ok {
		var patch map[string]json.RawMessage
		if err := json.Unmarshal(raw, &patch); err != nil {
			t.Fatal(err)
		}
		for k, p := range patch {
			model[k] = p
		}
	}
	top["model"] = mustJSON(t, model)
	for _, k := range []string{"normalizer", "pre_tokenizer", "added_tokens"} {
		if raw, ok := v[k]; ok {
			top[k] = raw
		}
	}
	return mustJSON(t, top)
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
