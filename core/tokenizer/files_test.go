package tokenizer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// within runs f, failing the test if it has not returned in 10 s (a reader
// blocked on a FIFO).
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still running after 10 s", what)
		return nil
	}
}

// Each file of a tokenizer folder that is (or leads to) a FIFO or a device
// is refused, naming it: none is read until memory runs out (/dev/zero)
// nor blocks the reader for ever (a FIFO).
func TestLoadRefusesSpecialFiles(t *testing.T) {
	kinds := map[string]func(path string) error{
		"symlink to /dev/zero": func(path string) error { return os.Symlink("/dev/zero", path) },
		"fifo":                 func(path string) error { return syscall.Mkfifo(path, 0o644) },
	}
	for _, file := range []string{TokenizerFile, ConfigFile, ChatTemplateFile} {
		for kind, make := range kinds {
			t.Run(file+" "+kind, func(t *testing.T) {
				dir := t.TempDir()
				writeFile(t, filepath.Join(dir, TokenizerFile), string(tinyJSON(t, tinyMerges, nil)))
				writeFile(t, filepath.Join(dir, ConfigFile), `{"chat_template": "{{ messages }}"}`)
				path := filepath.Join(dir, file)
				os.Remove(path)
				if err := make(path); err != nil {
					t.Fatal(err)
				}
				load := Load
				if file == ChatTemplateFile { // Load reads the config only
					load = func(dir string) (*Tokenizer, error) { _, err := LoadConfig(dir); return nil, err }
				}
				err := within(t, "Load", func() error { _, err := load(dir); return err })
				if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a regular file") {
					t.Fatalf("err = %v, want it to name %s as not a regular file", err, path)
				}
			})
		}
	}
}

func TestReadModelFileCapsSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), TokenizerFile)
	writeFile(t, path, strings.Repeat(" ", 2048))
	if _, err := readModelFile(path, 1024); err == nil || !strings.Contains(err.Error(), "over the limit of 1024 bytes") {
		t.Fatalf("a 2 KiB file under a 1 KiB cap: %v", err)
	}
	if data, err := readModelFile(path, 2048); err != nil || len(data) != 2048 {
		t.Fatalf("a file at the cap: %d bytes, %v", len(data), err)
	}
}

// A Split pattern that backtracks catastrophically fails the count within
// about its match time, naming the pattern, instead of spinning for hours.
func TestCatastrophicPatternFails(t *testing.T) {
	const pattern = `(a|aa)+$`
	tok, err := FromJSON(tinyJSON(t, tinyMerges, func(top, _ map[string]any) {
		top["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": pattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if n := countOf(t, tok, "aaaa"); n == 0 { // a short text still matches
		t.Fatal("no tokens for aaaa")
	}
	text := "<|x|>" + strings.Repeat("a", 60) + "b"
	start := time.Now()
	err = within(t, "Count", func() error { _, err := tok.Count(text); return err })
	var pe *PatternError
	if !errors.As(err, &pe) || pe.Pattern != pattern || !strings.Contains(err.Error(), `"(a|aa)+$"`) {
		t.Fatalf("err = %v, want a PatternError naming %s", err, pattern)
	}
	if strings.Contains(err.Error(), strings.Repeat("a", 60)) {
		t.Errorf("the error holds the text: %v", err)
	}
	if _, err := tok.Encode(text); !errors.As(err, &pe) {
		t.Errorf("Encode: %v", err)
	}
	t.Logf("failed after %v", time.Since(start))
}

// Added-token ids that HF's tokenizers refuse (it reads them as u32) are
// refused, naming the token.
func TestAddedTokenIDsOutOfRange(t *testing.T) {
	for _, id := range []int64{-5, 1 << 40, 1 << 32} {
		_, err := FromJSON(tinyJSON(t, tinyMerges, func(top, _ map[string]any) {
			top["added_tokens"] = []any{map[string]any{"id": id, "content": "<|bad|>", "special": true}}
		}))
		if err == nil || !strings.Contains(err.Error(), `added_tokens[0] ("<|bad|>") has id`) {
			t.Errorf("id %d: err = %v", id, err)
		}
	}
	if _, err := FromJSON(tinyJSON(t, tinyMerges, func(top, _ map[string]any) {
		top["added_tokens"] = []any{map[string]any{"id": 1<<32 - 1, "content": "<|ok|>", "special": true}}
	})); err != nil {
		t.Errorf("the largest u32 id: %v", err)
	}
}
