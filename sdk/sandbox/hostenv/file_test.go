package hostenv

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before string // "" for no file before
		sub    string // a folder under the temp dir to write into, made by the write
		data   string
	}{
		{"new file", "", "", "{}"},
		{"replaces", "old and longer", "", "new"},
		{"makes its folder", "", "state/deeper", "x"},
		{"empty data", "old", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), tc.sub)
			path := filepath.Join(dir, "sb.json")
			if tc.before != "" {
				if err := os.WriteFile(path, []byte(tc.before), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteFileAtomic(path, []byte(tc.data)); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil || string(data) != tc.data {
				t.Fatalf("file holds %q (%v), want %q", data, err, tc.data)
			}
			info, _ := os.Stat(path)
			if info.Mode().Perm() != 0o600 {
				t.Fatalf("mode %v, want 0600", info.Mode().Perm())
			}
			if tc.sub != "" {
				if info, _ := os.Stat(dir); info.Mode().Perm() != 0o700 {
					t.Fatalf("folder mode %v, want 0700", info.Mode().Perm())
				}
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Fatalf("folder holds %d entries (a temp file left?): %v", len(entries), entries)
			}
		})
	}
}

func TestWriteFileAtomicNoFolder(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(filepath.Join(file, "sub", "sb.json"), nil); err == nil {
		t.Fatal("wrote under a file")
	}
}
