package pluginhost

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/sdk"
)

func TestCanonicalName(t *testing.T) {
	for _, tc := range []struct {
		kind       sdk.Kind
		name, want string
	}{
		{sdk.KindToolFormat, "qwen3_coder", "qwen3_coder"},
		{sdk.KindToolFormat, "qwen3coder", "qwen3_coder"},
		{sdk.KindToolFormat, "qwen3-coder", "qwen3_coder"},
		{sdk.KindToolFormat, "hermes", "hermes"},
		{sdk.KindToolFormat, "qwen3", "qwen3"},
		{sdk.KindReward, "qwen3coder", "qwen3coder"}, // aliases are per kind
		{sdk.KindSandbox, "my_box", "my_box"},        // no folding of '_' and '-'
	} {
		if got := CanonicalName(tc.kind, tc.name); got != tc.want {
			t.Errorf("CanonicalName(%s, %q) = %q, want %q", tc.kind, tc.name, got, tc.want)
		}
	}
}

func TestNearest(t *testing.T) {
	opts := []string{"mean", "hermes", "qwen3_coder", "qwen3coder", "local"}
	for _, tc := range []struct{ name, want string }{
		{"meen", "mean"},
		{"median", "mean"},
		{"Hermes", "hermes"},
		{"hermes2", "hermes"},
		{"qwen3", "qwen3_coder"},
		{"qwen3coderr", "qwen3coder"},
		{"lcoal", "local"},
		{"nope", ""},
		{"ecs", ""},
		{"x", ""},
	} {
		if got := nearest(tc.name, opts); got != tc.want {
			t.Errorf("nearest(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := nearest("mean", nil); got != "" {
		t.Errorf("nearest among nothing = %q", got)
	}
}

// A plugin that is not found is reported with the plugins there are, the
// nearest name, and, for a first-party plugin the binary was built
// without, how to get it; never with a folder (that goes to the debug
// log), since the error may be sent to a remote client.
func TestNotFoundErrors(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"agentenv-reward-mean", "agentenv-reward-weighted", "agentenv-toolformat-qwen3coder"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	h := &Host{searchPath: []string{dir}, selfExe: filepath.Join(dir, "agentenv"), builtins: []string{"toolformat-hermes"},
		log: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})}

	// An alias names a binary under its old file name too.
	c, err := h.resolve(sdk.KindToolFormat, "qwen3-coder")
	if err != nil || c.name != "qwen3_coder" || c.path != filepath.Join(dir, "agentenv-toolformat-qwen3coder") {
		t.Fatalf("resolve(qwen3-coder) = %+v, %v", c, err)
	}

	tests := []struct {
		kind sdk.Kind
		name string
		want string
	}{
		{sdk.KindReward, "meen", `reward plugin "meen" not found; did you mean "mean"? (reward plugins: mean, weighted)`},
		{sdk.KindToolFormat, "nope", `toolformat plugin "nope" not found (toolformat plugins: hermes, qwen3_coder)`},
		{sdk.KindToolFormat, "qwen3coderr", `toolformat plugin "qwen3coderr" not found; did you mean "qwen3_coder"?`},
		{sdk.KindSandbox, "docker", `sandbox plugin "docker" not found (there are no sandbox plugins; agentenv plugins list shows where they are looked for)`},
		// local is first-party, but neither built in nor on the path here.
		{sdk.KindSandbox, "local", `sandbox plugin "local" is not built into this agentenv binary (builds with -tags no_local leave it out); ` +
			`rebuild agentenv without that tag, or build the plugin alone into a plugin folder, from agentenv's source tree: ` +
			`go build -o ~/.agentenv/plugins/ ./plugins/sandbox-local/cmd/agentenv-sandbox-local`},
	}
	for _, tc := range tests {
		_, err := h.resolve(tc.kind, tc.name)
		var nf *NotFoundError
		if !errors.Is(err, ErrNotFound) || !errors.As(err, &nf) {
			t.Errorf("resolve(%s, %s) = %v, want a NotFoundError", tc.kind, tc.name, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("resolve(%s, %s):\n got %s\nwant %s", tc.kind, tc.name, err, tc.want)
		}
		if strings.Contains(err.Error(), dir) {
			t.Errorf("resolve(%s, %s) names the folder: %s", tc.kind, tc.name, err)
		}
	}
	if !strings.Contains(logs.String(), dir) || !strings.Contains(logs.String(), "agentenv-reward-meen") {
		t.Errorf("the debug log does not say where it looked:\n%s", logs.String())
	}

	ctx := context.Background()
	for id, want := range map[string]string{
		"meen":                  `plugin "meen" not found; did you mean "mean"? (plugins: reward-mean, reward-weighted, toolformat-hermes, toolformat-qwen3_coder)`,
		"reward-meen":           `reward plugin "meen" not found; did you mean "mean"?`,
		"local":                 `sandbox plugin "local" is not built into this agentenv binary`,
		"sandbox/local":         `sandbox plugin "local" is not built into this agentenv binary`,
		"toolformat-qwen4coder": `toolformat plugin "qwen4coder" not found; did you mean "qwen3_coder"?`,
	} {
		_, err := h.Inspect(ctx, id)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), dir) {
			t.Errorf("Inspect(%s) = %v\nwant %s", id, err, want)
		}
	}
	omitted := h.Omitted()
	if len(omitted) != 3 || omitted[0].ID() != "sandbox-ecs" || omitted[1].ID() != "sandbox-k8s" || omitted[2].ID() != "sandbox-local" {
		t.Errorf("Omitted = %v, want sandbox-ecs, sandbox-k8s and sandbox-local", omitted)
	}
}
