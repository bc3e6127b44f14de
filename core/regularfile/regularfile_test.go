//go:build unix

package regularfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Open hands back only regular files, following links; anything else is
// refused without blocking (a FIFO) and names what it is.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	mk := func(name, target string) string {
		p := filepath.Join(dir, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct{ path, want string }{
		{plain, ""},
		{mk("link", plain), ""},
		{fifo, "a named pipe (FIFO)"},
		{mk("zero", "/dev/zero"), "a character device"},
		{dir, "a folder"},
	} {
		f, fi, err := Open(tc.path)
		if tc.want == "" {
			if err != nil || fi.Size() != 1 {
				t.Errorf("Open(%s) = %v, %v", tc.path, fi, err)
			}
			f.Close()
			continue
		}
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%s) = %v, want %q", tc.path, err, tc.want)
		}
	}
	if _, _, err := Open(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
