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
	"testing"

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
	files := map[string]builtin.FirstParty{} // file -> plugin it must link
	for _, f := range builtin.FirstParties() {
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
			t.Errorf("%s links a plugin sdk/builtin's first-party list does not have", name)
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

// `go build -tags no_hermes,no_local` leaves those plugins out: plugins
// list and inspect agree, plugin-serve refuses them, and serve says what
// is missing and how to get it rather than "not found".
func TestBuildTagsLeavePluginsOut(t *testing.T) {
	bin := agentenvTagged(t, "no_hermes,no_local")
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
		t.Errorf("plugins list of a no_hermes,no_local build: %v, want %v", ids, want)
	}
	out, _, _ = runBin(t, bin, "", "plugins", "list")
	for _, want := range []string{"not built in: sandbox-local (this agentenv was built with -tags no_local)",
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
