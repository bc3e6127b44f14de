package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/core/pluginhost"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

// docs/plugins.md's "agentenv plus your plugins, as one binary", followed
// from an empty folder outside this module: a main package importing the
// cli package, the first-party plugins it wants and a plugin of its own
// (testdata/ouragentenv, quoted in the page), in a module of its own that
// points at this checkout. The binary lists the plugin as built in and
// runs it through its own plugin-serve; the plugins it left out are named
// as not built in.
func TestOwnBinaryWithOurPlugin(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	if err := os.CopyFS(work, os.DirFS("testdata/ouragentenv")); err != nil {
		t.Fatal(err)
	}
	// The checkout's go.sum files hold the sums of what the build needs.
	// go mod tidy wants more: the test-only and other platforms'
	// dependencies of dependencies (mousetrap, go-winio, testify...), which
	// no build fetched, so a fresh module cache lacks them. The test does
	// what the page says, as a user would: tidy fetches them from the
	// module proxy (GOPROXY as this machine has it), into the module cache
	// in use (.ci/run's starts empty).
	var sums []byte
	for _, m := range []string{".", "sdk", "client"} {
		b, err := os.ReadFile(filepath.Join(root, m, "go.sum"))
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, b...)
	}
	if err := os.WriteFile(filepath.Join(work, "go.sum"), sums, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"mod", "init", "example.com/our-agentenv"},
		{"mod", "edit", "-replace", "github.com/agentenv/agentenv=" + root,
			"-replace", "github.com/agentenv/agentenv/sdk=" + filepath.Join(root, "sdk"),
			"-replace", "github.com/agentenv/agentenv/client=" + filepath.Join(root, "client")},
		{"mod", "tidy"},
		{"build", "-o", "agentenv", "."},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil && args[1] == "tidy" && proxyUnreachable(out) {
			sdktest.Missing(t, "the Go module proxy", "go mod tidy fetches the modules the page's recipe needs that no build fetched", "network access to GOPROXY ("+goEnv(t, "GOPROXY")+")")
		}
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	bin := filepath.Join(work, "agentenv")

	out, stderr, code := runBin(t, bin, "", "version")
	if code != 0 || !strings.HasPrefix(out, "agentenv 1.0.0-ours (") {
		t.Fatalf("version: exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = runBin(t, bin, "", "plugins", "list", "--json")
	if code != 0 {
		t.Fatalf("plugins list: exit %d\n%s", code, stderr)
	}
	var entries []pluginhost.Entry
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("plugins list --json printed %q: %v", out, err)
	}
	var ids []string
	for _, e := range entries {
		if e.Source != pluginhost.SourceBuiltin || !e.OK() {
			t.Errorf("%s: %+v", e.ID(), e)
		}
		ids = append(ids, e.ID())
	}
	if got, want := strings.Join(ids, " "), "reward-lowest reward-mean sandbox-local toolformat-hermes"; got != want {
		t.Errorf("built in: %s; want %s", got, want)
	}
	out, stderr, code = runBin(t, bin, "", "plugins", "list")
	if code != 0 || !strings.Contains(out, "not built in: sandbox-ecs") || !strings.Contains(out, "not built in: toolformat-qwen3_coder") {
		t.Errorf("plugins list does not name the plugins left out: exit %d\n%s%s", code, out, stderr)
	}
	// inspect starts the plugin: the binary serves it as `plugin-serve
	// reward-lowest`, and its Info comes back over go-plugin.
	out, stderr, code = runBin(t, bin, "", "plugins", "inspect", "lowest")
	if code != 0 || !strings.Contains(out, "version:   1.0.0\n") || !strings.Contains(out, "command:   "+bin+" plugin-serve reward-lowest\n") ||
		!strings.Contains(out, "status:    ok\n") {
		t.Errorf("plugins inspect lowest: exit %d\n%s%s", code, out, stderr)
	}
}

// proxyUnreachable reports whether go's output says the module proxy
// could not be reached (no network), rather than that a module is wrong.
func proxyUnreachable(out []byte) bool {
	for _, sign := range []string{"dial tcp", "no such host", "i/o timeout", "network is unreachable", "connection refused"} {
		if strings.Contains(string(out), sign) {
			return true
		}
	}
	return false
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}
