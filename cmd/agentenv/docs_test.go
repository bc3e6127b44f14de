package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/agentenv/agentenv/cmd/agentenv/cli"
	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// docFiles are the README and every page of docs/.
func docFiles(t *testing.T) map[string]string {
	t.Helper()
	paths, _ := filepath.Glob("../../docs/*.md")
	paths = append(paths, "../../README.md")
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = string(b)
	}
	if len(out) < 5 {
		t.Fatalf("found %d doc files", len(out))
	}
	return out
}

// Every relative link of the docs leads to a file of the tree, and a link
// to a heading of a page (page.md#anchor, or #anchor on the same page) to a
// heading that page has, as GitHub makes its anchors: a link to a heading
// renamed since lands at the top of a long page.
func TestDocsLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)#\s]*)(#[^)\s]*)?\)`)
	docs := docFiles(t)
	anchors := map[string]map[string]bool{} // cleaned path -> its anchors
	anchorsOf := func(path string) map[string]bool {
		path = filepath.Clean(path)
		if a, ok := anchors[path]; ok {
			return a
		}
		text, ok := docs[path]
		if !ok {
			b, err := os.ReadFile(path)
			if err != nil {
				return nil
			}
			text = string(b)
		}
		anchors[path] = headingAnchors(text)
		return anchors[path]
	}
	for path, text := range docs {
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target, frag := m[1], strings.TrimPrefix(m[2], "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || target == "" && frag == "" {
				continue
			}
			file := path
			if target != "" {
				file = filepath.Join(filepath.Dir(path), target)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s links to %s, which does not exist", path, target)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			if !anchorsOf(file)[frag] {
				t.Errorf("%s links to %s#%s, a heading %s does not have", path, target, frag, filepath.Base(file))
			}
		}
	}
}

// headingAnchors are the anchors GitHub gives a Markdown page's headings:
// the heading's text lower-cased, with everything but letters, digits,
// spaces, '-' and '_' dropped and spaces made '-'; a repeated one gets
// -1, -2, ... Headings inside fenced code blocks are not headings.
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		h := strings.TrimLeft(line, "#")
		if fenced || h == line || len(line)-len(h) > 6 || !strings.HasPrefix(h, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(h)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}

// The docs may say a SkyRL piece is missing (the README's "Not built
// yet"), but must not describe one as there before it is: the rows writer
// is there when the binary has the command, the Python env when its
// package is in the tree.
func TestDocsDescribeNoUnbuiltSkyRLPieces(t *testing.T) {
	_, _, cmdErr := cli.NewRootCmd(version).Find([]string{"skyrl", "rows"})
	_, pkgErr := os.Stat("../../integrations/skyrl/agentenv_skyrl/__init__.py")
	pieces := []struct {
		name  string
		re    *regexp.Regexp
		built bool
	}{
		{"agentenv skyrl rows", regexp.MustCompile("agentenv skyrl"), cmdErr == nil},
		{"the agentenv_skyrl package", regexp.MustCompile("agentenv_skyrl"), pkgErr == nil},
	}
	for path, text := range docFiles(t) {
		// The section that says what is missing may name it.
		if i := strings.Index(text, "## Not built yet"); i >= 0 {
			text = text[:i]
		}
		for n, line := range strings.Split(text, "\n") {
			for _, p := range pieces {
				if !p.built && p.re.MatchString(line) {
					t.Errorf("%s:%d describes %s, which is not built, as if it were there: %s", path, n+1, p.name, line)
				}
			}
		}
	}
}

// protocol.md puts each case under the code the server sends: a reset at
// an index past the end of a split is NOT_FOUND.
func TestProtocolDocIndexPastTheEnd(t *testing.T) {
	b, err := bundle.Load("../../core/bundle/testdata/singleturn", bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Play only resolves the task: nothing is deployed.
	e, err := episode.NewEngine(episode.Config{Bundle: b, Sandbox: struct{ sandbox.Driver }{},
		ToolFormat: func(string) (toolformat.Parser, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Play(episode.Request{Split: "all", Index: new(len(b.Tasks))})
	code := string(episode.CodeOf(err))
	doc, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "| `") || !strings.Contains(line, "past the end") {
			continue
		}
		if !strings.HasPrefix(line, "| `"+code+"`") {
			t.Errorf("protocol.md puts an index past the end under %.30s…; the server sends %s", line, code)
		}
		return
	}
	t.Errorf("protocol.md's error codes do not say which one an index past the end of a split gets (%s)", code)
}

// docQuotes fails the test unless docs/<page> quotes each line verbatim:
// a test that runs a command whose output a page quotes calls it with the
// lines the command printed, so the page cannot drift from the binary.
func docQuotes(t *testing.T, page string, lines ...string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../docs", page))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if !strings.Contains(string(b), l) {
			t.Errorf("docs/%s does not quote what the binary prints now; update it to:\n%s", page, l)
		}
	}
}

// The README's layout names every command of the binary.
func TestReadmeNamesEveryCommand(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "cmd/agentenv/ ") {
			line = l
		}
	}
	if line == "" {
		t.Fatal("README.md has no cmd/agentenv/ line in its layout")
	}
	for _, c := range cli.NewRootCmd(version).Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(c.Name()) + `\b`).MatchString(line) {
			t.Errorf("README.md's cmd/agentenv/ line does not name the %q command: %s", c.Name(), line)
		}
	}
}

// No table of the docs is cut by a blank line or a paragraph: markdown
// ends the table there and shows the rows after it as a paragraph of pipes
// (serving.md's flag table lost --max-queued-messages so, ecs.md's
// settings eight rows). Every table starts with its header and separator
// row.
func TestDocsTablesUnbroken(t *testing.T) {
	sep := regexp.MustCompile(`^\|\s*:?-{3,}`)
	for path, text := range docFiles(t) {
		lines := strings.Split(text, "\n")
		fence := false
		for i, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				fence = !fence
			}
			// A row that starts a table must be its header: a separator
			// line follows. One that does not was cut off from the table
			// above (by a blank line, a paragraph) and renders as text.
			if fence || !strings.HasPrefix(l, "|") || i > 0 && strings.HasPrefix(lines[i-1], "|") {
				continue
			}
			if i+1 >= len(lines) || !sep.MatchString(lines[i+1]) {
				t.Errorf("%s:%d: a table row with no header (cut off from the table above by a blank line or a paragraph?): %.80s", path, i+1, l)
			}
		}
	}
}

// The headings skyrl_gridsim.sh points its reader at ("Warm start") are
// headings of docs/training-skyrl.md (one was renamed under it).
func TestSkyRLScriptHeadingsExist(t *testing.T) {
	script, err := os.ReadFile("../../examples/gridsim/skyrl_gridsim.sh")
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile("../../docs/training-skyrl.md")
	if err != nil {
		t.Fatal(err)
	}
	quoted := regexp.MustCompile(`(?m)^#.*?"([A-Z][^"]+)"`).FindAllStringSubmatch(string(script), -1)
	if len(quoted) < 2 {
		t.Fatalf("found %d headings quoted in skyrl_gridsim.sh", len(quoted))
	}
	for _, m := range quoted {
		if !regexp.MustCompile(`(?m)^#+ ` + regexp.QuoteMeta(m[1]) + `$`).Match(page) {
			t.Errorf("skyrl_gridsim.sh points at %q, no heading of docs/training-skyrl.md", m[1])
		}
	}
}
