package bundle

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// copyBundle copies testdata/<name> into a temp folder and returns it.
func copyBundle(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", name))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// loadWithin loads dir, failing the test if Load has not returned in 10 s
// (a loader that blocks on a FIFO).
func loadWithin(t *testing.T, dir string) (*Bundle, error) {
	t.Helper()
	type result struct {
		b   *Bundle
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := Load(dir, Options{})
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		return r.b, r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("Load(%s) still running after 10 s", dir)
		return nil, nil
	}
}

// Every file the loader reads is refused, with its name, when it is a
// device (here /dev/zero, which would be read until memory runs out) or a
// FIFO (which would block the loader forever); nothing hangs.
func TestLoadRefusesSpecialFiles(t *testing.T) {
	files := []string{"README.md", "envs/toy/env.toml", "tasks/play.json", "tasks/level.seeds.jsonl", "evals/test.toml"}
	kinds := map[string]func(path string) error{
		"symlink to /dev/zero": func(path string) error { return os.Symlink("/dev/zero", path) },
		"fifo":                 func(path string) error { return syscall.Mkfifo(path, 0o644) },
	}
	for _, rel := range files {
		for kind, make := range kinds {
			t.Run(rel+" "+kind, func(t *testing.T) {
				dir := copyBundle(t, "full")
				path := filepath.Join(dir, rel)
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				if err := make(path); err != nil {
					t.Fatal(err)
				}
				_, err := loadWithin(t, dir)
				if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a regular file") {
					t.Fatalf("got %v, want a problem naming %s as not a regular file", err, rel)
				}
			})
		}
	}
}

// Symlinks are followed the same way wherever they are, env folders
// included; one that leads out of the bundle is a warning naming it.
func TestSymlinksLeavingTheBundleWarn(t *testing.T) {
	dir := copyBundle(t, "full")
	outside := t.TempDir()
	move := func(rel string) {
		t.Helper()
		to := filepath.Join(outside, filepath.Base(rel))
		if err := os.Rename(filepath.Join(dir, rel), to); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(to, filepath.Join(dir, rel)); err != nil {
			t.Fatal(err)
		}
	}
	move("envs/toy")
	move("tasks/play.json")
	// A symlink inside the bundle is no warning.
	if err := os.Rename(filepath.Join(dir, "tasks/quiz.json"), filepath.Join(dir, "quiz-source.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../quiz-source.json", filepath.Join(dir, "tasks/quiz.json")); err != nil {
		t.Fatal(err)
	}
	b, err := loadWithin(t, dir)
	if err != nil {
		t.Fatalf("a bundle with symlinked files and env folder: %v", err)
	}
	if len(b.Tasks) != 7 || b.Envs["toy"] == nil {
		t.Fatalf("loaded %d tasks, envs %v", len(b.Tasks), b.Envs)
	}
	want := map[string]bool{filepath.Join(dir, "envs/toy"): false, filepath.Join(dir, "tasks/play.json"): false}
	for _, w := range b.Warnings {
		for p := range want {
			if strings.HasPrefix(w, p+" is a symlink to ") && strings.Contains(w, "outside the bundle") {
				want[p] = true
			}
		}
		if strings.Contains(w, "quiz") {
			t.Errorf("a symlink inside the bundle warned: %s", w)
		}
	}
	for p, seen := range want {
		if !seen {
			t.Errorf("no warning for %s; warnings: %q", p, b.Warnings)
		}
	}
}

func TestReadBundleFileCapsSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(path, make([]byte, 2048), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readBundleFile(path, 1024); err == nil || !strings.Contains(err.Error(), "over the limit of 1024 bytes") {
		t.Fatalf("a 2 KiB file under a 1 KiB cap: %v", err)
	}
	if data, err := readBundleFile(path, 2048); err != nil || len(data) != 2048 {
		t.Fatalf("a file at the cap: %d bytes, %v", len(data), err)
	}
}
