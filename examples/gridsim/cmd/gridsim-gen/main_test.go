package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The exact command recorded in the docs reproduces the committed file.
func TestRunReproducesCommittedFile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "day.seeds.jsonl")
	if err := run([]string{"-out", out}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../tasks/day.seeds.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("gridsim-gen -out ... differs from tasks/day.seeds.jsonl; regenerate and commit")
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".gridsim-gen-*")); len(left) > 0 {
		t.Fatalf("temp files left behind: %v", left)
	}
}

func TestRunErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no out", nil, "-out is required"},
		{"no days", []string{"-train", "0", "-eval", "0", "-out", "-"}, "positive number of days"},
		{"missing dir", []string{"-out", filepath.Join(dir, "nope", "x.jsonl")}, "writing"},
		{"bad flag", []string{"-seed", "x"}, "invalid value"},
	}
	for _, c := range cases {
		var stdout bytes.Buffer
		err := run(c.args, &stdout)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: run(%v) = %v, want error %q", c.name, c.args, err, c.want)
		}
	}
	var stdout bytes.Buffer
	if err := run([]string{"-train", "2", "-eval", "1", "-out", "-"}, &stdout); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(stdout.String(), "\n"); n != 3 {
		t.Fatalf("-out - wrote %d lines, want 3", n)
	}
}
