package main

import (
	"encoding/json"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/firstparty"
	"github.com/agentenv/agentenv/core/pluginhost"
	"github.com/agentenv/agentenv/sdk/builtin"
)

// The three places a first-party plugin is declared agree: its package
// registers it (so a default build links it), sdk/builtin's first-party
// list names it with its build tag, and one builtins_<name>.go file here
// imports it behind `//go:build !<tag>`. Its standalone command is where
// the not-built-in error says to build it from.
func TestBuiltinsMatchFirstParty(t *testing.T) {
	var want []string
	files := map[string]firstparty.Plugin{} // file -> plugin it must link
	for _, f := range firstparty.All() {
		want = append(want, f.ID())
		files["builtins_"+f.Name+".go"] = f
		if _, err := os.Stat(filepath.Join("../..", f.SourceDir(), "main.go")); err != nil {
			t.Errorf("%s: no standalone command at %s: %v", f.ID(), f.SourceDir(), err)
		}
	}
	slices.Sort(want)
	if got := builtin.IDs(); !slices.Equal(got, want) {
		t.Errorf("registered built-ins %v, first-party list %v: every first-party plugin registers itself, under the name listed", got, want)
	}
	found, err := filepath.Glob("builtins_*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range found {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, ok := files[name]
		if !ok {
			t.Errorf("%s links a plugin core/firstparty's list does not have", name)
			continue
		}
		delete(files, name)
		file, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		var expr constraint.Expr
		for _, cg := range file.Comments {
			for _, c := range cg.List {
				if constraint.IsGoBuild(c.Text) {
					expr, _ = constraint.Parse(c.Text)
				}
			}
		}
		if expr == nil || expr.String() != "!"+f.Tag {
			t.Errorf("%s: build constraint %v, want //go:build !%s", name, expr, f.Tag)
		}
		if len(file.Imports) != 1 || file.Imports[0].Name == nil || file.Imports[0].Name.Name != "_" ||
			file.Imports[0].Path.Value != strconv.Quote(f.Package) {
			t.Errorf("%s: want exactly one blank import of %s", name, f.Package)
		}
	}
	for name, f := range files {
		t.Errorf("%s is first-party but no %s links it", f.ID(), name)
	}
}

// `go build -tags no_hermes,no_local,no_ecs,no_k8s` leaves those plugins out: plugins
// list and inspect agree, plugin-serve refuses them, and serve says what
// is missing and how to get it rather than "not found".
func TestBuildTagsLeavePluginsOut(t *testing.T) {
	bin := agentenvTagged(t, "no_hermes,no_local,no_ecs,no_k8s")
	out, stderr, code := runBin(t, bin, "", "plugins", "list", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var entries []pluginhost.Entry
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.ID())
	}
	if want := []string{"reward-mean", "toolformat-qwen3_coder"}; !slices.Equal(ids, want) {
		t.Errorf("plugins list of a no_hermes,no_local,no_ecs,no_k8s build: %v, want %v", ids, want)
	}
	out, _, _ = runBin(t, bin, "", "plugins", "list")
	for _, want := range []string{"not built in: sandbox-local (this agentenv was built with -tags no_local)",
		"not built in: sandbox-ecs (this agentenv was built with -tags no_ecs)",
		"not built in: sandbox-k8s (this agentenv was built with -tags no_k8s)",
		"not built in: toolformat-hermes (this agentenv was built with -tags no_hermes)"} {
		if !strings.Contains(out, want) {
			t.Errorf("plugins list lacks %q:\n%s", want, out)
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"plugins", "inspect", "hermes"}, `toolformat plugin "hermes" is not built into this agentenv binary (builds with -tags no_hermes leave it out); ` +
			`rebuild agentenv without that tag, or build the plugin alone into a plugin folder, from agentenv's source tree: ` +
			`go build -o ~/.agentenv/plugins/ ./plugins/toolformat-hermes/cmd/agentenv-toolformat-hermes`},
		{[]string{"plugin-serve", "toolformat-hermes"}, `no built-in plugin "toolformat-hermes" (built in: reward-mean, toolformat-qwen3_coder)`},
		{[]string{"serve", gridsimBundle, "--addr", "127.0.0.1:0", "--sandbox", "local"},
			`sandbox "local": sandbox plugin "local" is not built into this agentenv binary (builds with -tags no_local leave it out)`},
		{[]string{"serve", gridsimBundle, "--addr", "127.0.0.1:0", "--sandbox", "ecs"},
			`sandbox "ecs": sandbox plugin "ecs" is not built into this agentenv binary (builds with -tags no_ecs leave it out)`},
	} {
		out, stderr, code := runBin(t, bin, "", tc.args...)
		if code != 1 || !strings.Contains(out+stderr, tc.want) {
			t.Errorf("%s: exit %d, want 1 and %q:\n%s%s", strings.Join(tc.args, " "), code, tc.want, out, stderr)
		}
	}

	// The standalone plugin the error points to, on the plugin path,
	// fills the gap.
	ext := t.TempDir()
	cmd := []string{"build", "-o", ext + "/", "./plugins/toolformat-hermes/cmd/agentenv-toolformat-hermes"}
	if out, err := goCommand("../..", cmd...); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(cmd, " "), err, out)
	}
	out, stderr, code = runBin(t, bin, ext, "plugins", "inspect", "hermes")
	if code != 0 || !strings.Contains(out, "source:    "+filepath.Join(ext, "agentenv-toolformat-hermes")) {
		t.Errorf("hermes from the plugin path: exit %d\n%s%s", code, out, stderr)
	}
}

// goCommand runs the go tool in dir.
func goCommand(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	return cmd.CombinedOutput()
}

// qwen3IdleSchedule is idleSchedule written in the qwen3_coder format.
var qwen3IdleSchedule = `<tool_call>\n<function=submit_schedule>\n<parameter=schedule>\n[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]\n</parameter>\n</function>\n</tool_call>`

// The tool format is qwen3_coder on the command line, in a reset and in
// the plugin list alike; its aliases resolve to it. An unknown tool_format
// in a reset is answered with the formats there are and no server path.
// The built-in formats run in the server's process, or as plugin-serve
// subprocesses with --isolate-tool-formats, and play alike.
func TestServeToolFormatNames(t *testing.T) {
	for _, c := range []struct {
		name    string
		args    []string
		wantLog string
	}{
		{"in process", nil, "plugins.toolformat-qwen3_coder: plugin runs in this process"},
		{"isolated", []string{"--isolate-tool-formats"}, "plugins.toolformat-qwen3_coder: plugin started: pid="},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := serveToolFormatNames(t, c.args...)
			if !strings.Contains(s.log.String(), c.wantLog) {
				t.Errorf("the log lacks %q:\n%s", c.wantLog, s.log)
			}
		})
	}
}

func serveToolFormatNames(t *testing.T, args ...string) *served {
	t.Helper()
	state := t.TempDir()
	addr := freeAddr(t)
	pluginDir := t.TempDir() // searched, so a leak of folders would show it
	s := startServe(t, gridsimBundle, addr, state, []string{pluginhost.PathEnv + "=" + pluginDir}, append([]string{"--tool-format", "qwen3_coder"}, args...)...)
	c := dialServe(t, addr, "")

	typ, data, err := c.call(`{"type": "reset", "data": {"split": "eval", "index": 0, "tool_format": "nope"}}`)
	msg, _ := data["message"].(string)
	if err != nil || typ != "error" || data["code"] != "VALIDATION_ERROR" ||
		!strings.Contains(msg, `toolformat plugin "nope" not found (toolformat plugins: hermes, qwen3_coder)`) {
		t.Fatalf("reset with an unknown tool_format: %s %v %v", typ, data, err)
	}
	if strings.Contains(msg, "/") || strings.Contains(msg, pluginDir) {
		t.Errorf("the error sent to the client names a server path: %q", msg)
	}
	// Someone typing the name nearly right is told the right one.
	_, data, _ = c.call(`{"type": "reset", "data": {"split": "eval", "index": 0, "tool_format": "qwen3"}}`)
	if msg, _ := data["message"].(string); !strings.Contains(msg, `did you mean "qwen3_coder"?`) {
		t.Errorf("reset with tool_format qwen3: %v", data)
	}

	// The server's default (--tool-format qwen3_coder) reads qwen3_coder calls.
	for _, frame := range []string{
		`{"type": "reset", "data": {"split": "eval", "index": 0}}`,
		`{"type": "step", "data": {"reply": "` + qwen3IdleSchedule + `"}}`,
	} {
		c.observation(frame)
	}
	final := c.observation(`{"type": "step", "data": {"reply": "I am done."}}`)
	if m := final["observation"].(map[string]any)["metrics"].(map[string]any); final["done"] != true || final["reward"] != 0.2 || m["tool_calls"] != 1.0 {
		t.Fatalf("a day played in qwen3_coder: %v", final)
	}
	// An alias names the same plugin.
	if obs := c.observation(`{"type": "reset", "data": {"split": "eval", "index": 1, "tool_format": "qwen3-coder"}}`); obs["done"] == true {
		t.Fatalf("reset with tool_format qwen3-coder: %v", obs)
	}
	if code := s.signalAndWait(t, syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.log)
	}
	return s
}
