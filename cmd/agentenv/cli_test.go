package main

import (
	"strings"
	"testing"
)

// --token-var takes a variable's name; given a token by mistake it must
// not print it back (into a terminal's scrollback, a CI log).
func TestTokenVarNotEchoed(t *testing.T) {
	const token = "9f8e7d6c5b4a39281706f5e4d3c2b1a0"
	out, stderr, code := run(t, "", "serve", gridsimBundle, "--addr", "127.0.0.1:0", "--token-var", token)
	if code == 0 || strings.Contains(out+stderr, token) {
		t.Fatalf("exit %d; output (must not hold the value):\n%s%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "--token-var takes the name of the environment variable") {
		t.Errorf("the error should say what --token-var wants:\n%s", stderr)
	}
	// A real variable name is still named, so the user sees which is unset.
	_, stderr, _ = run(t, "", "serve", gridsimBundle, "--addr", "127.0.0.1:0", "--token-var", "MY_UNSET_TOKEN")
	if !strings.Contains(stderr, "MY_UNSET_TOKEN") {
		t.Errorf("an unset variable should be named:\n%s", stderr)
	}
}

// A command missing its arguments says what they are, its usage line and
// an example, never cobra's bare "accepts 2 arg(s), received 0".
func TestMissingArgumentsShowUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"serve"}, []string{"serve needs the bundle folder to serve, got none", "usage: agentenv serve BUNDLE", "e.g. agentenv serve examples/gridsim"}},
		{[]string{"bundle", "check"}, []string{"check needs the bundle folder to check", "usage: agentenv bundle check DIR"}},
		{[]string{"play"}, []string{"play needs the agentenv server's URL, got none", "usage: agentenv play URL", "e.g. agentenv play http://"}},
		{[]string{"eval"}, []string{"eval needs the agentenv server's URL", "usage: agentenv eval URL", "e.g. agentenv eval http://"}},
		{[]string{"skyrl", "rows", "http://127.0.0.1:8200"}, []string{"rows needs the agentenv server's URL and the folder to write the rows to, got 1: http://127.0.0.1:8200", "usage: agentenv skyrl rows URL OUTDIR", "e.g. agentenv skyrl rows http://"}},
		{[]string{"plugins", "inspect"}, []string{"inspect needs the plugin's name", "usage: agentenv plugins inspect NAME"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, stderr, code := run(t, "", tc.args...)
			if code == 0 || strings.Contains(stderr, "arg(s)") {
				t.Fatalf("exit %d:\n%s", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// --help marks the flags a command cannot run without.
func TestHelpMarksRequiredFlags(t *testing.T) {
	for cmd, flags := range map[string][]string{"eval": {"model-url", "model", "tokenizer"}, "skyrl rows": {"tokenizer", "max-prompt-length"}} {
		out, _, code := run(t, "", append(strings.Fields(cmd), "--help")...)
		if code != 0 {
			t.Fatalf("%s --help: exit %d", cmd, code)
		}
		_, flagsPart, _ := strings.Cut(out, "\nFlags:\n")
		for _, line := range strings.Split(flagsPart, "\n") {
			for _, f := range flags {
				if strings.HasPrefix(strings.TrimSpace(line), "--"+f+" ") && !strings.HasSuffix(line, "(required)") {
					t.Errorf("%s --help does not mark --%s required: %s", cmd, f, line)
				}
			}
		}
		if n := strings.Count(out, "(required)"); n != len(flags) {
			t.Errorf("%s --help marks %d flags required, want %d:\n%s", cmd, n, len(flags), out)
		}
	}
}
