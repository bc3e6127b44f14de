//go:build unix

package transcript

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Special files among transcripts are refused at once, naming the file and
// what it is: a FIFO used to block the read for ever and a link to
// /dev/zero to be read until a 1 GiB line.
func TestReadRefusesSpecialFiles(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		make       func(path string) error
	}{
		{"fifo", "named pipe", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{"dev-zero", "character device", func(p string) error { return os.Symlink("/dev/zero", p) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeLines(t, filepath.Join(dir, "2026-12-01.jsonl"), ended("e1", day1, 10))
			bad := filepath.Join(dir, "2026-12-02.jsonl")
			if err := tc.make(bad); err != nil {
				t.Fatal(err)
			}
			for _, paths := range [][]string{{dir}, {bad}} {
				done := make(chan error, 1)
				go func() {
					_, err := Read(paths, func(*Record) error { return nil })
					done <- err
				}()
				select {
				case err := <-done:
					if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), tc.want) {
						t.Fatalf("Read(%v) = %v, want an error naming %s as a %s", paths, err, bad, tc.want)
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("Read(%v) still reading after 30 s", paths)
				}
			}
		})
	}
}

// A line over the bound is skipped with a note, without holding it, and
// the records after it are read.
func TestReadSkipsOverlongLine(t *testing.T) {
	defer func(m int) { maxLine = m }(maxLine)
	maxLine = 4096
	dir := t.TempDir()
	path := filepath.Join(dir, "2026-12-01.jsonl")
	writeLines(t, path, ended("e1", day1, 10), ended("big", day1, 3*maxLine), ended("e2", day1, 10), ended("tail", day1, 2*maxLine))
	// The last over-long line has no newline: a partial line over the bound.
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(path, data[:len(data)-1], 0o600); err != nil {
		t.Fatal(err)
	}
	var ids []string
	st, err := Read([]string{dir}, func(r *Record) error { ids = append(ids, r.EpisodeID); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ids, ",") != "e1,e2" || st.Skipped != 2 || st.FirstSkip == nil || !strings.Contains(st.FirstSkip.Error(), "line 2: a line longer than 4096 bytes") {
		t.Fatalf("read %v, stats %+v", ids, st)
	}
}

func writeLines(t *testing.T, path string, recs ...*Record) {
	t.Helper()
	var b []byte
	for _, r := range recs {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, line...), '\n')
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
