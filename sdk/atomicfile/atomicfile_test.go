package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before string // "" for no file before
		sub    string // a folder under the temp dir to write into
		data   string
		perm   os.FileMode
	}{
		{"new file", "", "", "{}", 0o644},
		{"replaces", "old and longer", "", "new", 0o600},
		{"in a folder", "", "out/deeper", "x", 0o644},
		{"empty data", "old", "", "", 0o640},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), tc.sub)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "f.json")
			if tc.before != "" {
				if err := os.WriteFile(path, []byte(tc.before), 0o666); err != nil {
					t.Fatal(err)
				}
			}
			if err := Write(path, []byte(tc.data), tc.perm); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil || string(data) != tc.data {
				t.Fatalf("file holds %q (%v), want %q", data, err, tc.data)
			}
			if info, _ := os.Stat(path); info.Mode().Perm() != tc.perm {
				t.Fatalf("mode %v, want %v", info.Mode().Perm(), tc.perm)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Fatalf("folder holds %d entries (a temp file left?): %v", len(entries), entries)
			}
		})
	}
}

func TestWriteFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	// The target is a non-empty folder: the rename fails.
	path := filepath.Join(dir, "f.json")
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	err := Write(path, []byte("data"), 0o644)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v, want one naming %s", err, path)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("a temp file was left: %v", entries)
	}
	missing := filepath.Join(dir, "nope", "f.json")
	if err := Write(missing, nil, 0o644); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("wrote into a missing folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nope")); err == nil {
		t.Fatal("the missing folder was made")
	}
}
