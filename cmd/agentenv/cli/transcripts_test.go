package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad use of agentenv transcripts is refused naming what was wrong and
// what to do.
func TestTranscriptsRefusals(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "2026-12-02.jsonl"), []byte("not json\n{\"episode_id\": \"e\", \"task_id\": \"t\", \"outcome\": \"done\"}\n{\"episode_id\": \"cut"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		args       []string
		err, noted string
	}{
		{"no path", []string{"list"}, "list needs the serve --record directory or transcript files", ""},
		{"missing path", []string{"list", filepath.Join(dir, "nope")}, "no such file", ""},
		{"bad cause", []string{"list", dir, "--cause", "bad_luck"}, `--cause "bad_luck": want one of completed`, ""},
		{"empty range", []string{"list", dir, "--min-reward", "1", "--max-reward", "0"}, "--min-reward, --max-reward: reward range 1 to 0 is empty", ""},
		{"show no match", []string{"show", dir, "--episode", "other"}, "no recorded episode matches", "skipped 1 line that is no transcript"},
		{"sft without --out", []string{"sft", dir}, `"out" not set`, ""},
		{"kwargs without tokenizer", []string{"sft", dir, "--out", filepath.Join(dir, "x.parquet"), "--chat-template-kwargs", "{}"}, "--chat-template-kwargs goes with --tokenizer", ""},
		{"sft nothing qualifies", []string{"sft", dir, "--out", filepath.Join(dir, "x.parquet")}, "1 records read, 1 matched the filter, none scored 1 or more", "skipped 1 cut-off last line (a server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := NewRootCmd("test")
			var stdout, stderr bytes.Buffer
			cmd.SetOut(&stdout)
			cmd.SetErr(&stderr)
			cmd.SetArgs(append([]string{"transcripts"}, tc.args...))
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
			if !strings.Contains(stderr.String(), tc.noted) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.noted)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "x.parquet")); !os.IsNotExist(err) {
		t.Errorf("a refused sft left a file: %v", err)
	}
}

// list's summary counts in words a user reads: "1 file", not "1 files".
func TestTranscriptsListSummary(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "2026-12-02.jsonl"), []byte(`{"episode_id": "e", "task_id": "t", "outcome": "done"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := NewRootCmd("test")
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"transcripts", "list", dir})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got := stderr.String(); got != "1 of 1 episode (1 file)\n" {
		t.Fatalf("stderr = %q", got)
	}
}
