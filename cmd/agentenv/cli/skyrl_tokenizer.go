package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/core/dataset/skyrl"
	"github.com/agentenv/agentenv/core/tokenizer"
)

// hubTimeout bounds resolving (and downloading) a tokenizer from the Hub.
const hubTimeout = 10 * time.Minute

// loadTokenizer loads a model's tokenizer and chat template from ref: a
// local folder, the Hugging Face cache, or a download from the Hub into
// that cache (HF_HOME, HF_ENDPOINT, HF_TOKEN; see docs/tokenizers.md).
// skyrl rows uses it; eval, which counts no tokens, loads only the chat
// template (loadChatTemplate), found the same way.
var loadTokenizer = func(ref string, stderr io.Writer) (skyrl.Counter, skyrl.TokenizerConfig, error) {
	dir, cfg, err := loadChatTemplate(ref, stderr)
	if err != nil {
		return nil, skyrl.TokenizerConfig{}, err
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, skyrl.TokenizerConfig{}, err
	}
	return tok, cfg, nil
}

// loadChatTemplate resolves ref as loadTokenizer does and reads the
// model's chat template and special tokens, returning the folder too. It
// does not load the BPE (a second or so for Qwen3's).
func loadChatTemplate(ref string, stderr io.Writer) (string, skyrl.TokenizerConfig, error) {
	hub := tokenizer.HubFromEnv()
	hub.Logger = hclog.New(&hclog.LoggerOptions{Name: "tokenizer", Output: stderr, Level: hclog.Info})
	ctx, cancel := context.WithTimeout(context.Background(), hubTimeout)
	defer cancel()
	dir, err := hub.Resolve(ctx, ref)
	if err != nil {
		return "", skyrl.TokenizerConfig{}, err
	}
	cfg, err := tokenizer.LoadConfig(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", skyrl.TokenizerConfig{}, fmt.Errorf("tokenizer %s has no tokenizer_config.json, so no chat template: point --tokenizer at the model's folder or Hub id, which has one", ref)
	}
	if err != nil {
		return "", skyrl.TokenizerConfig{}, err
	}
	out := skyrl.TokenizerConfig{ChatTemplate: cfg.ChatTemplate, BOSToken: cfg.BOSToken, EOSToken: cfg.EOSToken}
	if cfg.TemplateSource != "" {
		out.Source = filepath.Join(dir, cfg.TemplateSource) // the errors of a template name its file
	}
	// Templates may also use pad_token and unk_token, which transformers
	// passes as it passes bos and eos.
	out.PadToken, out.UnkToken = specialTokens(filepath.Join(dir, tokenizer.ConfigFile))
	return dir, out, nil
}

// specialTokens reads pad_token and unk_token (strings or AddedToken
// objects) from a tokenizer_config.json; absent ones are "".
func specialTokens(path string) (pad, unk string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", ""
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(b, &raw) != nil {
		return "", ""
	}
	tok := func(k string) string {
		var s string
		if json.Unmarshal(raw[k], &s) == nil {
			return s
		}
		var d struct{ Content string }
		_ = json.Unmarshal(raw[k], &d)
		return d.Content
	}
	return tok("pad_token"), tok("unk_token")
}
