package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The committed go.work.sum is complete and has nothing redundant: a
// command that loads the workspace's module graph (go doc, go list -m all)
// in any module of a fresh clone leaves it as it is. The test runs those
// commands on a copy of the workspace's go.work, go.work.sum, go.mod and
// go.sum files.
func TestGoWorkSumIsTidy(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	work, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.work.sum"))
	if err != nil {
		t.Fatal(err)
	}
	copyDir := t.TempDir()
	write := func(rel string, data []byte) {
		t.Helper()
		p := filepath.Join(copyDir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.work", work)
	write("go.work.sum", sum)
	var modules []string
	for _, line := range strings.Split(string(work), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "./"); ok {
			modules = append(modules, m)
		}
	}
	if len(modules) < 5 {
		t.Fatalf("read %d modules from go.work", len(modules))
	}
	for _, m := range modules {
		for _, f := range []string{"go.mod", "go.sum"} {
			if data, err := os.ReadFile(filepath.Join(root, m, f)); err == nil {
				write(filepath.Join(m, f), data)
			}
		}
	}
	for _, m := range modules {
		cmd := exec.Command("go", "list", "-m", "all")
		cmd.Dir = filepath.Join(copyDir, m)
		cmd.Env = append(os.Environ(), "GOWORK=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go list -m all in %s: %v\n%s", m, err, out)
		}
	}
	after, err := os.ReadFile(filepath.Join(copyDir, "go.work.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after, sum) {
		t.Fatalf("go list -m all rewrote go.work.sum (commit the file it writes: run `go list -m all` in a module folder)\nadded:\n%s\nremoved:\n%s",
			strings.Join(linesOnlyIn(after, sum), "\n"), strings.Join(linesOnlyIn(sum, after), "\n"))
	}
}

// linesOnlyIn lists the lines of a that b lacks.
func linesOnlyIn(a, b []byte) []string {
	in := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		in[l] = true
	}
	var out []string
	for _, l := range strings.Split(string(a), "\n") {
		if !in[l] {
			out = append(out, l)
		}
	}
	return out
}
