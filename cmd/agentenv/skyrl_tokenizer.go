package main

// STAND-IN until core/tokenizer (the byte-level BPE over tokenizer.json
// and the Hub/cache loader) is merged: the lead replaces loadTokenizer
// with tokenizer.Load and its tokenizer_config.json loader. Until then
// it reads a local folder's chat template and counts pre-tokens (the
// Qwen2 split without its lookahead), which under-counts BPE tokens.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"

	"github.com/agentenv/agentenv/core/dataset/skyrl"
)

// loadTokenizer loads a model's token counter and chat template from ref,
// a local folder (or, with core/tokenizer, a Hugging Face model id).
var loadTokenizer = func(ref string, stderr io.Writer) (skyrl.Counter, skyrl.TokenizerConfig, error) {
	if st, err := os.Stat(ref); err != nil || !st.IsDir() {
		return nil, skyrl.TokenizerConfig{}, errors.New("not a local folder (downloading from the Hugging Face Hub comes with the tokenizer package)")
	}
	cfg, err := readTemplateConfig(ref)
	if err != nil {
		return nil, skyrl.TokenizerConfig{}, err
	}
	fmt.Fprintln(stderr, "note: token counts are estimates (pre-tokens) until the BPE tokenizer is wired in")
	return preTokenCounter{}, cfg, nil
}

func readTemplateConfig(dir string) (skyrl.TokenizerConfig, error) {
	b, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return skyrl.TokenizerConfig{}, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return skyrl.TokenizerConfig{}, fmt.Errorf("tokenizer_config.json: %w", err)
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
	cfg := skyrl.TokenizerConfig{ChatTemplate: tok("chat_template"), BOSToken: tok("bos_token"), EOSToken: tok("eos_token"), PadToken: tok("pad_token"), UnkToken: tok("unk_token")}
	if t, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja")); err == nil {
		cfg.ChatTemplate = string(t)
	}
	return cfg, nil
}

var (
	specialToken = regexp.MustCompile(`<\|[^|<>\s]+\|>|</?think>|</?tool_call>|</?tools>`)
	preToken     = regexp.MustCompile(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+`)
)

type preTokenCounter struct{}

func (preTokenCounter) Count(text string) int {
	n := 0
	for _, part := range specialToken.Split(text, -1) {
		n += len(preToken.FindAllStringIndex(part, -1))
	}
	return n + len(specialToken.FindAllStringIndex(text, -1))
}
