package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/core/pluginhost"
	"github.com/agentenv/agentenv/internal/servetest"
	"github.com/agentenv/agentenv/sdk/builtin"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

func TestMain(m *testing.M) { os.Exit(servetest.Main(m)) }

// agentenv builds this command once per test run.
func agentenv(t *testing.T) string { return servetest.Binary(t) }

// agentenvTagged builds this command with the build tags given (e.g.
// "no_hermes"), once per test run.
func agentenvTagged(t *testing.T, tags string) string {
	t.Helper()
	return servetest.Build(t, servetest.Agentenv, tags)
}

// run runs agentenv with a private HOME and cache and the plugin path
// given, returning stdout, stderr and the exit code.
func run(t *testing.T, pluginPath string, args ...string) (string, string, int) {
	t.Helper()
	return runBin(t, agentenv(t), pluginPath, args...)
}

// runBin is run with the agentenv binary bin.
func runBin(t *testing.T, bin, pluginPath string, args ...string) (string, string, int) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CACHE_HOME=" + filepath.Join(home, "cache"),
		pluginhost.PathEnv + "=" + pluginPath}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

func TestPluginsListBuiltins(t *testing.T) {
	out, stderr, code := run(t, "", "plugins", "list", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var entries []pluginhost.Entry
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	got := map[string]pluginhost.Entry{}
	for _, e := range entries {
		got[e.ID()] = e
	}
	for _, id := range builtin.IDs() {
		e, ok := got[id]
		if !ok || e.Source != pluginhost.SourceBuiltin || !e.OK() || e.Version == "" || len(e.SHA256) != 64 {
			t.Errorf("built-in %s: %+v (found %v)", id, e, ok)
		}
	}
	if len(entries) != len(builtin.IDs()) {
		t.Errorf("listed %d plugins, want the %d built-ins", len(entries), len(builtin.IDs()))
	}
	// The name users write, with the spellings that resolve to it.
	if q := got["toolformat-qwen3_coder"]; q.Name != "qwen3_coder" || strings.Join(q.Aliases, " ") != "qwen3coder qwen3-coder" {
		t.Errorf("qwen3_coder: %+v", q)
	}
}

func TestPluginsListExternal(t *testing.T) {
	ext := t.TempDir()
	bin := sdktest.Build(t, "github.com/agentenv/agentenv/plugins/reward-mean/cmd/agentenv-reward-mean")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ext, "agentenv-reward-mean"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ext, "agentenv-toolformat-broken"), []byte("#!/bin/sh\necho oops\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A failed plugin makes list exit 1, after the whole table.
	out, stderr, code := run(t, ext, "plugins", "list")
	if code != 1 || !strings.Contains(stderr, "1 of 7 plugins failed") {
		t.Fatalf("exit %d, want 1 with a failed plugin: %s", code, stderr)
	}
	if jsonOut, _, jsonCode := run(t, ext, "plugins", "list", "--json"); jsonCode != 1 || !json.Valid([]byte(jsonOut)) {
		t.Fatalf("list --json with a failed plugin: exit %d, want 1 and the JSON list:\n%s", jsonCode, jsonOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "SHA256") || !strings.Contains(lines[0], "STATUS") {
		t.Fatalf("no header: %q", lines[0])
	}
	find := func(name string) []string {
		for _, l := range lines[1:] {
			if f := strings.Fields(l); len(f) > 0 && f[0] == name {
				return f
			}
		}
		t.Fatalf("no line for %s in\n%s", name, out)
		return nil
	}
	if f := find("mean"); f[3] != filepath.Join(ext, "agentenv-reward-mean") || f[5] != "ok" || len(f[4]) != 12 {
		t.Errorf("mean line %v: want the external binary overriding the built-in, ok", f)
	}
	if f := find("broken"); f[1] != "toolformat" || !strings.Contains(strings.Join(f, " "), `failed: not an agentenv plugin: it printed "oops"`) {
		t.Errorf("broken line %v", f)
	}
	if !strings.Contains(out, "failed\n") || !strings.Contains(out, "1 failed") {
		t.Errorf("no summary line in\n%s", out)
	}
}

func TestPluginsInspect(t *testing.T) {
	tests := []struct {
		args     []string
		code     int
		contains []string
	}{
		{[]string{"plugins", "inspect", "reward-mean"}, 0, []string{"name:      mean", "kind:      reward", "source:    built-in", "plugin-serve reward-mean", "config schema: none"}},
		{[]string{"plugins", "inspect", "local"}, 0, []string{"kind:      sandbox", "config schema:\n{", `"state_dir"`}},
		{[]string{"plugins", "inspect", "mean", "--json"}, 0, []string{`"kind": "reward"`, `"status": "ok"`}},
		{[]string{"plugins", "inspect", "nope"}, 1, []string{`plugin "nope" not found (plugins: reward-mean, sandbox-ecs, sandbox-k8s, sandbox-local, toolformat-hermes, toolformat-qwen3_coder)`}},
		{[]string{"plugins", "inspect", "meen"}, 1, []string{`plugin "meen" not found; did you mean "mean"?`}},
		{[]string{"plugins", "inspect", "toolformat-qwen3"}, 1, []string{`toolformat plugin "qwen3" not found; did you mean "qwen3_coder"? (toolformat plugins: hermes, qwen3_coder)`}},
		{[]string{"plugins", "inspect", "qwen3_coder"}, 0, []string{"name:      qwen3_coder", "aliases:   qwen3coder, qwen3-coder", "kind:      toolformat", "plugin-serve toolformat-qwen3_coder"}},
		{[]string{"plugins", "inspect", "qwen3coder"}, 0, []string{"name:      qwen3_coder", "status:    ok"}},
		{[]string{"plugins", "inspect", "toolformat/qwen3-coder"}, 0, []string{"name:      qwen3_coder", "status:    ok"}},
		{[]string{"plugins", "list", "--help"}, 0, []string{"--json", "agentenv plugins list"}},
		{[]string{"version"}, 0, []string{"agentenv ", "plugin protocol 3"}},
		{[]string{"plugin-serve", "reward-nope"}, 1, []string{`no built-in plugin "reward-nope"`}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, stderr, code := run(t, "", tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, stderr)
			}
			for _, c := range tc.contains {
				if !strings.Contains(out+stderr, c) {
					t.Errorf("output lacks %q:\n%s%s", c, out, stderr)
				}
			}
		})
	}
}
