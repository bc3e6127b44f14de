package e2e

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

const guidePath = "docs/writing-a-sandbox-plugin.md"

// block is a fenced code block of the guide and the comment line above it.
type block struct {
	mark, lang, text string
	line             int
}

// blocks reads the fenced code blocks of a markdown file.
func blocks(t *testing.T, doc string) []block {
	t.Helper()
	var out []block
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		lang, ok := strings.CutPrefix(lines[i], "```")
		if !ok || lang == "" {
			continue
		}
		b := block{lang: lang, line: i + 1}
		if i > 0 && strings.HasPrefix(lines[i-1], "<!-- ") {
			b.mark = strings.TrimSuffix(strings.TrimPrefix(lines[i-1], "<!-- "), " -->")
		}
		var body []string
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			body = append(body, lines[i])
		}
		b.text = strings.Join(body, "\n") + "\n"
		out = append(out, b)
	}
	return out
}

// The guide's Go excerpts are the example's code, as it is.
func TestGuideExcerptsMatchTheCode(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, guidePath))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range blocks(t, string(doc)) {
		path, ok := strings.CutPrefix(b.mark, "from: ")
		if !ok {
			continue
		}
		n++
		src, err := os.ReadFile(filepath.Join(repoRoot, path))
		if err != nil {
			t.Errorf("%s:%d: %v", guidePath, b.line, err)
			continue
		}
		if !strings.Contains(string(src), b.text) {
			t.Errorf("%s:%d: the excerpt is not in %s any more:\n%s", guidePath, b.line, path, b.text)
		}
	}
	if n < 5 {
		t.Errorf("found %d excerpts marked <!-- from: PATH --> in %s; the guide has more", n, guidePath)
	}
}

// The guide, followed literally: every block marked <!-- guide: run -->,
// in order, as one bash script, from an empty folder outside the
// repository, with a home of its own. It ends with GridSim episodes scored
// through the plugin it builds, before and after a hot swap.
func TestGuideFromAnEmptyFolder(t *testing.T) {
	needBwrap(t)
	doc, err := os.ReadFile(filepath.Join(repoRoot, guidePath))
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, b := range blocks(t, string(doc)) {
		if b.mark == "guide: run" {
			if b.lang != "sh" {
				t.Fatalf("%s:%d: a run block must be sh, not %s", guidePath, b.line, b.lang)
			}
			steps = append(steps, b.text)
		}
	}
	if len(steps) < 7 {
		t.Fatalf("found %d run blocks in %s", len(steps), guidePath)
	}
	// The one change: a free port instead of 8200, so runs do not collide.
	script := "set -euo pipefail\n" + strings.ReplaceAll(strings.Join(steps, "\n"), "127.0.0.1:8200", freeAddr(t))

	home, work := t.TempDir(), t.TempDir()
	env := guideEnv(t, home)
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = work
	cmd.Env = env
	out := &logBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own group, killed at the end: the guide's server runs in the
	// background.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	select {
	case err = <-done:
	case <-time.After(9 * time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("the guide's steps still running after 9 minutes; output:\n%s", out)
	}
	serveLog, _ := os.ReadFile(filepath.Join(work, "sandbox-bwrap", "serve.log"))
	if err != nil {
		t.Fatalf("the guide's steps failed: %v\noutput:\n%s\nserve.log:\n%s", err, out, serveLog)
	}
	for _, want := range []string{"reward 0.5013551380817227", "reward 0.2\n", "ok  \texample.com/sandbox-bwrap"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the guide's output lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`\[INFO\]  agentenv\.plugins\.sandbox-bwrap: deployed: `),
		regexp.MustCompile(`\[INFO\]  agentenv\.plugins\.sandbox-bwrap: terminated: `),
		regexp.MustCompile(`hot swap: new calls go to the new plugin: pid=\d+ version=0\.1\.1`),
	} {
		if !want.Match(serveLog) {
			t.Errorf("serve.log lacks %s:\n%s", want, serveLog)
		}
	}
	if left := keepers(filepath.Join(home, ".cache", "agentenv", "bwrap")); len(left) > 0 {
		t.Errorf("sandboxes left running after serve stopped: %v", left)
	}
}

// guideEnv is this process's environment with a new, empty home, and
// AGENTENV_SRC set to this checkout. The home's Go caches point at this
// machine's, so nothing is downloaded or compiled twice: the go commands
// the plugin runs (Prepare builds GridSim's env) see only PATH, HOME and
// TMPDIR.
func guideEnv(t *testing.T, home string) []string {
	t.Helper()
	goEnv, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	paths := strings.Fields(string(goEnv))
	if len(paths) != 2 {
		t.Fatalf("go env GOCACHE GOMODCACHE = %q", goEnv)
	}
	for link, target := range map[string]string{
		filepath.Join(home, ".cache", "go-build"): paths[0],
		filepath.Join(home, "go", "pkg", "mod"):   paths[1],
	} {
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "HOME", "AGENTENV_SRC", "AGENTENV_PLUGIN_PATH", "GOPATH", "GOWORK", "XDG_CACHE_HOME", "XDG_CONFIG_HOME":
		default:
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+home, "AGENTENV_SRC="+repoRoot, "GOCACHE="+paths[0], "GOMODCACHE="+paths[1])
}

// freeAddr is a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
