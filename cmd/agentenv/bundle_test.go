package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runBundleCheck runs the real binary, as a user does: with --reward it
// starts plugins, which only the agentenv binary can serve.
func runBundleCheck(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, stderr, code := run(t, "", append([]string{"bundle", "check"}, args...)...)
	if code != 0 {
		return out, fmt.Errorf("exit %d: %s", code, stderr)
	}
	return out, nil
}

func TestBundleCheck(t *testing.T) {
	full := filepath.Join("..", "..", "core", "bundle", "testdata", "full")
	broken := t.TempDir()
	if err := os.MkdirAll(filepath.Join(broken, "tasks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, "tasks", "a.json"), []byte("[\n  {\"id\": \"p\", \"type\": \"prompt\"}\n]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want []string // in the output, or in the error when err
		err  bool
	}{
		{"valid", []string{full}, []string{
			"bundle full\n  Every kind of task, and two evals.",
			"toy  command bin/toyenv, build go build -o bin/toyenv ., port 18765",
			"all    7 tasks  4 toolsets", "test   3 tasks  3 toolsets", "train  4 tasks  2 toolsets",
			"3 tasks  envs toy; turns: default; hidden: toy/setup", "turns: look | default; +end_turn",
			"needs a reward: bundle full: task scored has several verifier steps",
		}, false},
		{"reward score missing", []string{full, "--reward", "score:grade"}, []string{`5 tasks (chat, level/l1, level/l2, level/l3, quiz) have no verifier step "grade"`}, true},
		{"broken", []string{broken}, []string{filepath.Join(broken, "tasks", "a.json") + `:2: step "p": unknown step type "prompt"`}, true},
		{"missing folder", []string{filepath.Join(broken, "nope")}, []string{"nope: no such folder"}, true},
		{"no argument", nil, []string{"check needs the bundle folder to check, got none", "bundle check DIR", "--help"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runBundleCheck(t, tc.args...)
			if (err != nil) != tc.err {
				t.Fatalf("err %v, want error: %v\n%s", err, tc.err, out)
			}
			text := out
			if err != nil {
				text = err.Error()
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("missing %q in:\n%s", w, text)
				}
			}
		})
	}
}

// --reward naming a reward plugin is checked against the plugins there
// are, as serve checks it: a misspelt name fails bundle check too.
func TestBundleCheckRewardPlugin(t *testing.T) {
	full := filepath.Join("..", "..", "core", "bundle", "testdata", "full")
	out, stderr, code := run(t, "", "bundle", "check", full, "--reward", "mean")
	if code != 0 || !strings.Contains(out, `reward "mean": every task can be rewarded`) {
		t.Fatalf("--reward mean: exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = run(t, "", "bundle", "check", full, "--reward", "meen")
	if code == 0 || strings.Contains(out, "every task can be rewarded") || !strings.Contains(stderr, `reward "meen"`) {
		t.Fatalf("--reward meen: exit %d\n%s%s", code, out, stderr)
	}
}
