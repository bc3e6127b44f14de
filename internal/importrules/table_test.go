package importrules

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// page is the architecture page whose parts table is the rule.
const page = "../../docs/architecture.md"

// TestArchitectureTable holds every package of the repository to the
// "may import" column of docs/architecture.md's parts table.
func TestArchitectureTable(t *testing.T) {
	rows := readPage(t, page)
	pkgs, err := repoPackages()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range Check("docs/architecture.md", strings.TrimSuffix(repo, "/"), rows, pkgs) {
		t.Error(m)
	}

	// The same table refuses the import this rule was made to remove: the
	// engine knowing the plugin host.
	t.Run("forbidden import", func(t *testing.T) {
		forged := slices.Clone(pkgs)
		found := false
		for i, p := range forged {
			if p.ImportPath == repo+"core/episode" {
				forged[i].Imports = append(slices.Clone(p.Imports), repo+"core/pluginhost")
				found = true
			}
		}
		if !found {
			t.Fatal("no core/episode package in the listing")
		}
		got := Check("docs/architecture.md", strings.TrimSuffix(repo, "/"), rows, forged)
		want := "core/episode imports core/pluginhost, which row `core/episode` does not allow"
		if !slices.ContainsFunc(got, func(m string) bool { return strings.Contains(m, want) }) {
			t.Errorf("with core/episode importing core/pluginhost, the check said %q; want a message containing %q", got, want)
		}
	})
}

func readPage(t *testing.T, name string) []Row {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := ParseTable(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return rows
}

func TestParseTable(t *testing.T) {
	const doc = "# Architecture\n\nintro `not/a/row`\n\n" +
		"| part | holds | may import |\n" +
		"|---|---|---|\n" +
		"| `sdk/` | the API: `Serve`, `split|index` | nothing of ours |\n" +
		"| `core/ui` | the page | `server` (its `Live`), `transcript` (the `Recent` ring (kept)) |\n" +
		"| `core/a`, `core/b` | leaves | `core/*`, `sdk/` only |\n" +
		"\n| other | table |\n|---|---|\n| `x` | `y` |\n"
	rows, err := ParseTable(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{Line: 7, Parts: []string{"sdk"}},
		{Line: 8, Parts: []string{"core/ui"}, Names: []string{"server", "transcript"}},
		{Line: 9, Parts: []string{"core/a", "core/b"}, Names: []string{"core", "sdk"}},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows = %+v; want %+v", rows, want)
	}
	for i := range want {
		if rows[i].Line != want[i].Line || !slices.Equal(rows[i].Parts, want[i].Parts) || !slices.Equal(rows[i].Names, want[i].Names) {
			t.Errorf("row %d = %+v; want %+v", i, rows[i], want[i])
		}
	}

	for _, bad := range []struct{ name, doc, want string }{
		{"no table", "# nothing here\n", "no parts table"},
		{"two cells", "| part | holds | may import |\n|---|---|---|\n| `a` | b |\n", "line 3: the parts table's row has 2 cells"},
		{"no part", "| part | holds | may import |\n|---|---|---|\n| a | b | c |\n", "line 3: the part column names no folder"},
		{"two tables", "| part | holds | may import |\n|---|---|---|\n\n| part | holds | may import |\n", "line 4: a second parts table"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			_, err := ParseTable(strings.NewReader(bad.doc))
			if err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("ParseTable error = %v; want one containing %q", err, bad.want)
			}
		})
	}
}

// TestCheck runs the check on made-up import graphs: each case is a
// table and a graph, and the messages the check must give (as substrings,
// one each, nothing else).
func TestCheck(t *testing.T) {
	const mod = "example.com/m"
	rows := []Row{
		{Line: 10, Parts: []string{"sdk"}},
		{Line: 11, Parts: []string{"plugins/<kind>-<name>"}, Names: []string{"sdk"}},
		{Line: 12, Parts: []string{"core/bundle"}, Names: []string{"regularfile"}},
		{Line: 13, Parts: []string{"core/episode"}, Names: []string{"bundle", "sdk"}},
		{Line: 14, Parts: []string{"core/regularfile", "core/pluginhost"}},
		{Line: 15, Parts: []string{"core/transcript"}, Names: []string{"episode"}},
		{Line: 16, Parts: []string{"core/transcript/sft"}, Names: []string{"transcript"}},
	}
	base := map[string][]string{
		"sdk":                          nil,
		"sdk/sandbox":                  {"sdk"},
		"plugins/sandbox-a":            {"sdk/sandbox", "plugins/sandbox-a/standin"},
		"plugins/sandbox-a/standin":    nil,
		"plugins/reward-b":             {"sdk"},
		"core/bundle":                  {"core/regularfile"},
		"core/regularfile":             nil,
		"core/pluginhost":              nil,
		"core/episode":                 {"core/bundle", "sdk/sandbox"},
		"core/transcript":              {"core/episode"},
		"core/transcript/sft":          {"core/transcript"},
		"core/transcript/sft/internal": nil,
	}
	for _, tc := range []struct {
		name string
		rows []Row
		add  map[string][]string // imports added to base (a nil slice adds a package)
		want []string
	}{
		{name: "the graph the table describes", want: nil},
		{name: "a forbidden import",
			add:  map[string][]string{"core/episode": {"core/pluginhost"}},
			want: []string{"page.md:13: core/episode imports core/pluginhost, which row `core/episode` does not allow"}},
		{name: "an import of a package below an allowed one",
			add: map[string][]string{"core/episode": {"core/bundle/internal"}, "core/bundle/internal": nil}},
		{name: "a plugin importing another plugin",
			add:  map[string][]string{"plugins/reward-b": {"plugins/sandbox-a/standin"}},
			want: []string{"page.md:11: plugins/reward-b imports plugins/sandbox-a/standin, which row `plugins/<kind>-<name>` does not allow"}},
		{name: "a package below a row imports its own folder, not its parent's",
			add:  map[string][]string{"core/transcript/sft": {"core/transcript/sft/internal", "core/episode"}},
			want: []string{"page.md:16: core/transcript/sft imports core/episode"}},
		{name: "a folder below with a row of its own is not the row's own",
			add:  map[string][]string{"core/transcript": {"core/transcript/sft"}},
			want: []string{"page.md:15: core/transcript imports core/transcript/sft, which row `core/transcript` does not allow"}},
		{name: "a package with no row",
			add:  map[string][]string{"core/zz": nil}, // a new package, no row
			want: []string{"page.md: package core/zz has no row in the parts table"}},
		{name: "an import from outside the repository is not checked",
			add: map[string][]string{"core/bundle": {"github.com/other/thing", "std:fmt"}}},
		{name: "a name that names nothing",
			rows: append(slices.Clone(rows), Row{Line: 20, Parts: []string{"core/zz"}, Names: []string{"Live"}}),
			add:  map[string][]string{"core/zz": nil},
			want: []string{"page.md:20: row `core/zz` allows `Live`, which is no folder of packages"}},
		{name: "a part that covers nothing",
			rows: append(slices.Clone(rows), Row{Line: 21, Parts: []string{"core/gone"}}),
			want: []string{"page.md:21: part `core/gone` covers no package"}},
		{name: "a part in two rows",
			rows: append(slices.Clone(rows), Row{Line: 22, Parts: []string{"core/pluginhost"}}),
			want: []string{"page.md:22: part `core/pluginhost` has a row already (page.md:14)"}},
		{name: "a name no package of the row imports",
			rows: append(slices.Clone(rows[:5]), Row{Line: 15, Parts: []string{"core/transcript"}, Names: []string{"episode", "pluginhost"}}, rows[6]),
			want: []string{"page.md:15: row `core/transcript` allows `core/pluginhost`, but none of its packages imports it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rows
			if tc.rows != nil {
				r = tc.rows
			}
			got := Check("page.md", mod, r, graph(mod, base, tc.add))
			if len(got) != len(tc.want) {
				t.Fatalf("Check gave %d messages, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for _, w := range tc.want {
				if !slices.ContainsFunc(got, func(m string) bool { return strings.Contains(m, w) }) {
					t.Errorf("no message contains %q; got:\n%s", w, strings.Join(got, "\n"))
				}
			}
		})
	}
}

// graph is base with add's imports added, as go list would list it:
// paths are the module's, but "std:fmt" (the standard library's fmt) and
// paths with a dot (another module's).
func graph(mod string, base, add map[string][]string) []Package {
	full := func(p string) string {
		if std, ok := strings.CutPrefix(p, "std:"); ok {
			return std
		}
		if strings.Contains(p, ".") { // another module
			return p
		}
		return mod + "/" + p
	}
	merged := map[string][]string{}
	for p, imps := range base {
		merged[p] = slices.Clone(imps)
	}
	for p, imps := range add {
		merged[p] = append(merged[p], imps...)
	}
	var pkgs []Package
	for p, imps := range merged {
		pk := Package{ImportPath: mod + "/" + p}
		for _, i := range imps {
			pk.Imports = append(pk.Imports, full(i))
		}
		pkgs = append(pkgs, pk)
	}
	slices.SortFunc(pkgs, func(a, b Package) int { return strings.Compare(a.ImportPath, b.ImportPath) })
	return pkgs
}

// TestForbiddenImportInModule runs the whole rule (the page parsed, go
// list, the check) on a small module of its own: it passes as written,
// and fails once one file imports what its row does not allow.
func TestForbiddenImportInModule(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatal("the go tool is needed to list packages:", err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/house\n\ngo 1.22\n")
	write("docs/architecture.md", "# The house\n\n"+
		"| part | holds | may import |\n|---|---|---|\n"+
		"| `core/bundle` | bundles | nothing else of core |\n"+
		"| `core/episode` | episodes | `bundle` |\n"+
		"| `core/pluginhost` | plugins | nothing of ours |\n")
	write("core/bundle/bundle.go", "package bundle\n\nconst Name = \"b\"\n")
	write("core/pluginhost/host.go", "package pluginhost\n\nimport \"errors\"\n\nvar ErrCrashed = errors.New(\"crashed\")\n")
	write("core/episode/episode.go", "package episode\n\nimport \"example.com/house/core/bundle\"\n\nvar Of = bundle.Name\n")
	// A test may import what it likes: tests are left out.
	write("core/bundle/bundle_test.go", "package bundle\n\nimport _ \"example.com/house/core/episode\"\n")

	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	check := func() []string {
		t.Helper()
		pkgs, err := List(dir, "./...", env)
		if err != nil {
			t.Fatal(err)
		}
		return Check("docs/architecture.md", "example.com/house", readPage(t, filepath.Join(dir, "docs/architecture.md")), pkgs)
	}
	if got := check(); len(got) != 0 {
		t.Fatalf("the module as its page describes it fails the check:\n%s", strings.Join(got, "\n"))
	}

	write("core/episode/crash.go", "package episode\n\nimport \"example.com/house/core/pluginhost\"\n\nvar Crashed = pluginhost.ErrCrashed\n")
	got := check()
	want := "docs/architecture.md:6: core/episode imports core/pluginhost, which row `core/episode` does not allow"
	if len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Fatalf("with core/episode importing core/pluginhost, the check gave:\n%s\nwant one message starting %q", strings.Join(got, "\n"), want)
	}
}
