package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// install copies the binary whole, executable, where it is told: the
// Kubernetes sandbox's init container runs it so from a FROM-scratch image.
func TestInstall(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	dest := filepath.Join(dir, "agentenv-terminal")
	if out, err := exec.Command(bin, "install", dest).CombinedOutput(); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	want, _ := os.ReadFile(bin)
	got, err := os.ReadFile(dest)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the copy differs from the binary (%d bytes, want %d): %v", len(got), len(want), err)
	}
	if fi, _ := os.Stat(dest); fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %v, want 0755", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left in the folder: %v", entries)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"install"}, "want one argument"},
		{[]string{"install", "a", "b"}, "want one argument"},
		{[]string{"install", filepath.Join(dir, "no", "such", "dir", "x")}, "no such file or directory"},
	} {
		out, err := exec.Command(bin, tc.args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "agentenv-terminal install: ") || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: %v, output %q; want a failure saying %q", tc.args, err, out, tc.want)
		}
	}
}
