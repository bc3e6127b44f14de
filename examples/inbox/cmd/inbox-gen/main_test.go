package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bundleCopy makes a folder shaped like the bundle, for the generator to
// write into.
func bundleCopy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, sub := range []string{"mailbox", "tasks"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The command the docs give reproduces both committed files byte for byte.
func TestReproducesCommittedFiles(t *testing.T) {
	dir := bundleCopy(t)
	if err := run([]string{"-dir", dir}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"mailbox/mailbox.json", "tasks/invoice.seeds.jsonl"} {
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("..", "..", f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("inbox-gen wrote a %s that differs from the committed one: run go run ./cmd/inbox-gen in examples/inbox and commit", f)
		}
	}
	for _, sub := range []string{"mailbox", "tasks"} {
		if left, _ := filepath.Glob(filepath.Join(dir, sub, ".inbox-gen-*")); len(left) > 0 {
			t.Fatalf("temp files left behind: %v", left)
		}
	}
}

func TestRunErrors(t *testing.T) {
	noTasks := t.TempDir()
	if err := os.Mkdir(filepath.Join(noTasks, "mailbox"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"not a bundle", []string{"-dir", t.TempDir()}, "is not a folder: run inbox-gen in examples/inbox"},
		{"no tasks folder", []string{"-dir", noTasks}, "tasks is not a folder"},
		{"bad seed", []string{"-seed", "x"}, "invalid value"},
		{"stray argument", []string{"-dir", noTasks, "out.json"}, `unexpected argument "out.json"`},
	}
	for _, c := range cases {
		err := run(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: run(%v) = %v, want an error saying %q", c.name, c.args, err, c.want)
		}
	}
	// A folder that fails the check gets nothing written, not half.
	if _, err := os.Stat(filepath.Join(noTasks, "mailbox", "mailbox.json")); !os.IsNotExist(err) {
		t.Fatalf("mailbox.json written into a folder without tasks/: %v", err)
	}
	// Another seed writes other files.
	dir := bundleCopy(t)
	if err := run([]string{"-dir", dir, "-seed", "1"}); err != nil {
		t.Fatal(err)
	}
	other, _ := os.ReadFile(filepath.Join(dir, "tasks", "invoice.seeds.jsonl"))
	committed, _ := os.ReadFile(filepath.Join("..", "..", "tasks", "invoice.seeds.jsonl"))
	if len(other) == 0 || bytes.Equal(other, committed) {
		t.Fatal("-seed 1 wrote the committed seeds, or nothing")
	}
}
