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
