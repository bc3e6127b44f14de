package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The files of a model that this package reads and downloads.
const (
	TokenizerFile    = "tokenizer.json"
	ConfigFile       = "tokenizer_config.json"
	ChatTemplateFile = "chat_template.jinja"
)

// Config is what a chat template needs from tokenizer_config.json (and
// chat_template.jinja).
type Config struct {
	// ChatTemplate is the template apply_chat_template uses when no name is
	// given: chat_template.jinja when the folder has one, else
	// tokenizer_config.json's chat_template (a string, or the entry named
	// "default" of a list). Empty when the model has none.
	ChatTemplate string
	// ChatTemplates holds every named template of a list-form chat_template.
	ChatTemplates map[string]string
	// TemplateSource names the file ChatTemplate came from.
	TemplateSource string
	// BOSToken and EOSToken are the tokens' text ("" when unset); the file
	// may write each as a string or as an AddedToken object.
	BOSToken string
	EOSToken string
	// SplitSpecialTokens makes special tokens in text be read as plain text.
	SplitSpecialTokens bool
}

type configSpec struct {
	ChatTemplate       json.RawMessage `json:"chat_template"`
	BOSToken           json.RawMessage `json:"bos_token"`
	EOSToken           json.RawMessage `json:"eos_token"`
	SplitSpecialTokens bool            `json:"split_special_tokens"`
}

// ParseConfig reads the contents of a tokenizer_config.json.
func ParseConfig(data []byte) (*Config, error) {
	var s configSpec
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %w", ConfigFile, err)
	}
	c := &Config{SplitSpecialTokens: s.SplitSpecialTokens}
	var err error
	if c.BOSToken, err = tokenText(s.BOSToken); err != nil {
		return nil, fmt.Errorf("%s: bos_token: %w", ConfigFile, err)
	}
	if c.EOSToken, err = tokenText(s.EOSToken); err != nil {
		return nil, fmt.Errorf("%s: eos_token: %w", ConfigFile, err)
	}
	if !isNull(s.ChatTemplate) {
		var one string
		if json.Unmarshal(s.ChatTemplate, &one) == nil {
			c.ChatTemplate = one
		} else {
			var named []struct {
				Name     string `json:"name"`
				Template string `json:"template"`
			}
			if err := json.Unmarshal(s.ChatTemplate, &named); err != nil {
				return nil, fmt.Errorf("%s: chat_template is neither a string nor a list of {name, template}: %w", ConfigFile, err)
			}
			c.ChatTemplates = make(map[string]string, len(named))
			for _, n := range named {
				c.ChatTemplates[n.Name] = n.Template
			}
			c.ChatTemplate = c.ChatTemplates["default"]
		}
		if c.ChatTemplate != "" {
			c.TemplateSource = ConfigFile
		}
	}
	return c, nil
}

// tokenText reads a token written as "text", {"content": "text", ...} or null.
func tokenText(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", fmt.Errorf("want a string or an object with \"content\", got %s", raw)
	}
	return *obj.Content, nil
}

// LoadConfig reads dir/tokenizer_config.json, and dir/chat_template.jinja,
// which takes the place of the config's default template as it does in
// transformers. The error wraps fs.ErrNotExist when the config is missing.
func LoadConfig(dir string) (*Config, error) {
	path := filepath.Join(dir, ConfigFile)
	data, err := readModelFile(path, MaxConfigBytes)
	if err != nil {
		return nil, fmt.Errorf("reading the tokenizer config: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	jinja := filepath.Join(dir, ChatTemplateFile)
	tmpl, err := readModelFile(jinja, MaxTemplateBytes)
	switch {
	case err == nil:
		c.ChatTemplate, c.TemplateSource = string(tmpl), ChatTemplateFile
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("reading the chat template: %w", err)
	}
	return c, nil
}
