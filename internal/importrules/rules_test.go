package importrules

import (
	"strings"
	"sync"
	"testing"
)

const repo = "github.com/agentenv/agentenv/"

// rule says which of our packages a package under prefix may depend on
// (directly or not, tests excluded): its own tree and those in allowed.
type rule struct {
	prefix  string
	allowed []string
}

var rules = []rule{
	{prefix: repo + "sdk", allowed: nil},
	{prefix: repo + "client", allowed: nil},
	{prefix: repo + "plugins/", allowed: []string{repo + "sdk"}},
	{prefix: repo + "examples/sandbox-bwrap", allowed: []string{repo + "sdk"}},
	{prefix: repo + "core/", allowed: []string{repo + "sdk", repo + "client", repo + "core/"}},
	// The terminal server is injected into task containers as a small
	// static binary: it links no engine package (its test checks the rest).
	{prefix: repo + "core/terminal", allowed: []string{repo + "core/tempfile"}},
	{prefix: repo + "cmd/agentenv-terminal", allowed: []string{repo + "core/terminal", repo + "core/tempfile"}},
	// The CLI links no plugin: the main package that imports it chooses
	// the built-ins (cmd/agentenv's builtins_*.go, or a team's own).
	{prefix: repo + "cmd/agentenv/cli", allowed: []string{repo + "sdk", repo + "client", repo + "core/"}},
}

// repoPackages lists every package of the workspace once per test run.
var repoPackages = sync.OnceValues(func() ([]Package, error) {
	return List(".", repo+"...", nil)
})

func TestImportRules(t *testing.T) {
	pkgs, err := repoPackages()
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]int{}
	for _, p := range pkgs {
		for _, r := range rules {
			if !inPrefix(p.ImportPath, r.prefix) {
				continue
			}
			checked[r.prefix]++
			for _, d := range p.Deps {
				if !strings.HasPrefix(d, repo) || inPrefix(d, own(p.ImportPath, r.prefix)) {
					continue
				}
				ok := false
				for _, a := range r.allowed {
					ok = ok || inPrefix(d, a)
				}
				if !ok {
					t.Errorf("%s depends on %s: packages under %s may use only %v of ours", p.ImportPath, d, r.prefix, r.allowed)
				}
			}
		}
	}
	for _, r := range rules {
		if checked[r.prefix] == 0 {
			t.Errorf("no package under %s was checked: the rule names a tree that is gone", r.prefix)
		}
	}
}

// inPrefix reports whether path is prefix itself or inside it.
func inPrefix(path, prefix string) bool {
	if strings.HasSuffix(prefix, "/") {
		return strings.HasPrefix(path, prefix)
	}
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// own is the tree a package may always use: the rule's folder, or for a
// prefix of many (plugins/), only the package's own entry in it
// (plugins/sandbox-ecs may use plugins/sandbox-ecs/standin, not another plugin).
func own(path, prefix string) string {
	if !strings.HasSuffix(prefix, "/") {
		return prefix
	}
	return prefix + strings.SplitN(strings.TrimPrefix(path, prefix), "/", 2)[0]
}
