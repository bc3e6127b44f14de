// Package tokenizer counts tokens as a model's Hugging Face tokenizer does.
//
// It reads a byte-level BPE tokenizer.json (Qwen2/Qwen3, Llama-3, GPT-2
// style) and encodes text exactly as HF's tokenizers library does with
// add_special_tokens=False, which is how transformers' apply_chat_template
// tokenizes a rendered chat: added and special tokens are cut out first,
// the rest is normalized (NFC for Qwen), split by the pre-tokenizer's regex
// and merged by BPE. Hub.Resolve finds a model's files in a folder, the
// Hugging Face cache or the Hub.
package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"
)

// Tokenizer encodes text into token ids. It is safe for concurrent use.
type Tokenizer struct {
	model           *bpe
	normalize       func(string) string // nil: none
	steps           []preStep
	added           *addedMatcher // tokens matched on the raw text
	addedNormalized *addedMatcher // tokens matched after normalization
	addedContent    map[int]string
	size            int
}

// FromJSON reads the contents of a tokenizer.json. A component this package
// cannot run exactly (a WordPiece model, a Metaspace pre-tokenizer, a
// Lowercase normalizer, ...) is refused with an error naming it.
func FromJSON(data []byte) (*Tokenizer, error) {
	var spec fileSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		if typ := modelType(data); typ != "" && typ != "BPE" {
			return nil, fmt.Errorf("tokenizer.json: %w", unsupported("model type", typ, "BPE"))
		}
		return nil, fmt.Errorf("tokenizer.json is not a tokenizer file HF's tokenizers would read: %w", err)
	}
	t, err := build(&spec)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	return t, nil
}

// LoadFile reads a tokenizer.json file.
func LoadFile(path string) (*Tokenizer, error) {
	data, err := readModelFile(path, MaxTokenizerBytes)
	if err != nil {
		return nil, fmt.Errorf("reading the tokenizer: %w", err)
	}
	t, err := FromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Load reads dir/tokenizer.json, applying split_special_tokens from
// dir/tokenizer_config.json when that file is there.
func Load(dir string) (*Tokenizer, error) {
	t, err := LoadFile(filepath.Join(dir, TokenizerFile))
	if err != nil {
		return nil, err
	}
	cfg, err := LoadConfig(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if cfg != nil && cfg.SplitSpecialTokens {
		for _, m := range []*addedMatcher{t.added, t.addedNormalized} {
			if m != nil {
				m.splitSpecial = true
			}
		}
	}
	return t, nil
}

// Encode returns the token ids of text, as HF's
// tokenizer.encode(text, add_special_tokens=False): special tokens written
// in the text (<|im_start|>) become their ids, and no BOS/EOS is added.
// Text that is not valid UTF-8 is read with each bad byte as U+FFFD. It
// fails only when a Split pattern runs out of its match time (a
// *PatternError).
func (t *Tokenizer) Encode(text string) ([]int, error) {
	return t.appendIDs(make([]int, 0, len(text)/3+1), text)
}

var idsPool = sync.Pool{New: func() any { s := make([]int, 0, 4096); return &s }}

// Count returns len(Encode(text)) without keeping the ids.
func (t *Tokenizer) Count(text string) (int, error) {
	p := idsPool.Get().(*[]int)
	ids, err := t.appendIDs((*p)[:0], text)
	n := len(ids)
	if cap(ids) <= 1<<20 {
		*p = ids[:0]
		idsPool.Put(p)
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

func (t *Tokenizer) appendIDs(out []int, text string) ([]int, error) {
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	var err error
	word := func(w string) { out = t.model.appendWord(out, w) }
	token := func(id int) { out = append(out, id) }
	pretokenize := func(s string) {
		if err == nil {
			err = chain(t.steps, s, word)
		}
	}
	t.added.split(text, func(s string) {
		if err != nil {
			return // the rest is not worth the work
		}
		if t.normalize != nil {
			s = t.normalize(s)
		}
		t.addedNormalized.split(s, pretokenize, token)
	}, token)
	return out, err
}

// Decode turns ids back into text (special tokens included as written).
func (t *Tokenizer) Decode(ids []int) (string, error) {
	var b strings.Builder
	for i, id := range ids {
		if c, ok := t.addedContent[id]; ok {
			b.WriteString(c)
			continue
		}
		if id < 0 || id >= len(t.model.vocabText) || t.model.vocabText[id] == "" {
			return "", fmt.Errorf("id %d (position %d) is not in the vocabulary", id, i)
		}
		tok := t.model.vocabText[id]
		if raw, ok := fromByteLevel(tok); ok {
			tok = raw
		}
		b.WriteString(tok)
	}
	return b.String(), nil
}

// TokenID returns the id of a token as the vocabulary or added_tokens write
// it (for example "<|im_end|>").
func (t *Tokenizer) TokenID(token string) (int, bool) {
	for id, c := range t.addedContent {
		if c == token {
			return id, true
		}
	}
	if raw, ok := fromByteLevel(token); ok {
		if id, ok := t.model.vocab[raw]; ok && t.model.vocabText[id] == token {
			return int(id), true
		}
	}
	return 0, false
}

// VocabSize is one more than the largest id, added tokens included.
func (t *Tokenizer) VocabSize() int { return t.size }
