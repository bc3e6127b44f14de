package terminal

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

func TestEditor(t *testing.T) {
	const five = "one\ntwo\nthree\ntwo\nfive\n"
	cases := []struct {
		name    string
		files   map[string]string // written to the workdir first
		args    map[string]any
		want    string // the whole text, when set
		has     []string
		isError bool
		// after: the files' content after the call (unchanged on error).
		after map[string]string
	}{
		{name: "view a file", files: map[string]string{"a.txt": "alpha\nbeta\n"},
			args: map[string]any{"command": "view", "path": "a.txt"},
			want: "     1\talpha\n     2\tbeta\n"},
		{name: "view a file without a final newline", files: map[string]string{"a.txt": "alpha\nbeta"},
			args: map[string]any{"command": "view", "path": "a.txt"},
			want: "     1\talpha\n     2\tbeta\n"},
		{name: "view a range", files: map[string]string{"a.txt": five},
			args: map[string]any{"command": "view", "path": "a.txt", "view_range": []int{2, 3}},
			want: "     2\ttwo\n     3\tthree\n"},
		{name: "view to the end", files: map[string]string{"a.txt": five},
			args: map[string]any{"command": "view", "path": "a.txt", "view_range": []int{4, -1}},
			want: "     4\ttwo\n     5\tfive\n"},
		{name: "view a range past the end", files: map[string]string{"a.txt": five},
			args: map[string]any{"command": "view", "path": "a.txt", "view_range": []int{9, 10}},
			want: "view_range first line 9 is outside a.txt, which has 5 lines", isError: true},
		{name: "view a range backwards", files: map[string]string{"a.txt": five},
			args: map[string]any{"command": "view", "path": "a.txt", "view_range": []int{3, 2}},
			want: "view_range [3, 2]: the last line is before the first", isError: true},
		{name: "view an empty file", files: map[string]string{"e.txt": ""},
			args: map[string]any{"command": "view", "path": "e.txt"}, want: "e.txt is empty"},
		{name: "view a missing file", args: map[string]any{"command": "view", "path": "nope.txt"},
			want: "nope.txt does not exist", isError: true},
		{name: "view a binary file", files: map[string]string{"b.bin": "ab\x00cd"},
			args: map[string]any{"command": "view", "path": "b.bin"},
			has:  []string{"b.bin looks binary"}, isError: true},
		{name: "view a folder",
			files: map[string]string{"src/main.py": "", "src/pkg/mod.py": "", "src/pkg/deep/x.py": "", ".git/config": "", "src/.hidden": "", "README": ""},
			args:  map[string]any{"command": "view", "path": "."},
			want:  ". (folder; entries two levels deep, hidden ones skipped):\nREADME\nsrc/\nsrc/main.py\nsrc/pkg/\n"},
		{name: "view an absolute path", files: map[string]string{"a.txt": "x\n"},
			args: map[string]any{"command": "view", "path": "WORKDIR/a.txt"}, want: "     1\tx\n"},

		{name: "create", args: map[string]any{"command": "create", "path": "new/dir/f.py", "file_text": "print(1)\n"},
			want: "Created new/dir/f.py (1 lines)", after: map[string]string{"new/dir/f.py": "print(1)\n"}},
		{name: "create overwrites", files: map[string]string{"f.txt": "old\n"},
			args: map[string]any{"command": "create", "path": "f.txt", "file_text": "new\nnew\n"},
			want: "Overwrote f.txt (2 lines)", after: map[string]string{"f.txt": "new\nnew\n"}},
		{name: "create an empty file", args: map[string]any{"command": "create", "path": "empty", "file_text": ""},
			want: "Created empty (0 lines)", after: map[string]string{"empty": ""}},
		{name: "create without file_text", args: map[string]any{"command": "create", "path": "f.txt"},
			want: "create needs file_text: the whole content of the file", isError: true},
		{name: "create over a folder", files: map[string]string{"d/x": ""},
			args: map[string]any{"command": "create", "path": "d", "file_text": "x"},
			want: "d is a folder: give a file path", isError: true},

		{name: "str_replace a unique string", files: map[string]string{"a.txt": five},
			args:  map[string]any{"command": "str_replace", "path": "a.txt", "old_str": "three\n", "new_str": "3\n3b\n"},
			want:  "Edited a.txt. Lines 1-6 now read:\n     1\tone\n     2\ttwo\n     3\t3\n     4\t3b\n     5\ttwo\n     6\tfive\n",
			after: map[string]string{"a.txt": "one\ntwo\n3\n3b\ntwo\nfive\n"}},
		{name: "str_replace deletes with no new_str", files: map[string]string{"a.txt": five},
			args:  map[string]any{"command": "str_replace", "path": "a.txt", "old_str": "three\n"},
			has:   []string{"Edited a.txt."},
			after: map[string]string{"a.txt": "one\ntwo\ntwo\nfive\n"}},
		{name: "str_replace a missing string", files: map[string]string{"a.txt": five},
			args:    map[string]any{"command": "str_replace", "path": "a.txt", "old_str": "four", "new_str": "4"},
			has:     []string{"old_str was not found in a.txt; nothing changed."},
			isError: true, after: map[string]string{"a.txt": five}},
		{name: "str_replace a string found twice", files: map[string]string{"a.txt": five},
			args:    map[string]any{"command": "str_replace", "path": "a.txt", "old_str": "two", "new_str": "2"},
			has:     []string{"old_str occurs 2 times in a.txt (lines 2, 4); nothing changed. Include more surrounding lines"},
			isError: true, after: map[string]string{"a.txt": five}},
		{name: "str_replace whitespace counts", files: map[string]string{"a.py": "def f():\n    return 1\n"},
			args:  map[string]any{"command": "str_replace", "path": "a.py", "old_str": "  return 1", "new_str": "  return 2"},
			has:   []string{"Edited a.py."},
			after: map[string]string{"a.py": "def f():\n    return 2\n"}},
		{name: "str_replace without old_str", files: map[string]string{"a.txt": five},
			args: map[string]any{"command": "str_replace", "path": "a.txt", "new_str": "x"},
			want: "str_replace needs old_str: the exact text to replace", isError: true},
		{name: "str_replace a missing file", args: map[string]any{"command": "str_replace", "path": "no.txt", "old_str": "a", "new_str": "b"},
			want: "no.txt does not exist", isError: true},

		{name: "insert at the top", files: map[string]string{"a.txt": "b\nc\n"},
			args:  map[string]any{"command": "insert", "path": "a.txt", "insert_line": 0, "new_str": "a"},
			want:  "Inserted 1 lines into a.txt after line 0. Lines 1-3 now read:\n     1\ta\n     2\tb\n     3\tc\n",
			after: map[string]string{"a.txt": "a\nb\nc\n"}},
		{name: "insert in the middle", files: map[string]string{"a.txt": "a\nd\n"},
			args:  map[string]any{"command": "insert", "path": "a.txt", "insert_line": 1, "new_str": "b\nc\n"},
			has:   []string{"Inserted 2 lines into a.txt after line 1."},
			after: map[string]string{"a.txt": "a\nb\nc\nd\n"}},
		{name: "insert after a last line with no newline", files: map[string]string{"a.txt": "a\nb"},
			args:  map[string]any{"command": "insert", "path": "a.txt", "insert_line": 2, "new_str": "c"},
			has:   []string{"Inserted 1 lines into a.txt after line 2."},
			after: map[string]string{"a.txt": "a\nb\nc\n"}},
		{name: "insert into an empty file", files: map[string]string{"a.txt": ""},
			args:  map[string]any{"command": "insert", "path": "a.txt", "insert_line": 0, "new_str": "x\n"},
			has:   []string{"Inserted 1 lines"},
			after: map[string]string{"a.txt": "x\n"}},
		{name: "insert past the end", files: map[string]string{"a.txt": "a\n"},
			args:    map[string]any{"command": "insert", "path": "a.txt", "insert_line": 5, "new_str": "x"},
			want:    "insert_line 5 is outside a.txt, which has 1 lines: give 0 to 1",
			isError: true, after: map[string]string{"a.txt": "a\n"}},
		{name: "insert without insert_line", files: map[string]string{"a.txt": "a\n"},
			args: map[string]any{"command": "insert", "path": "a.txt", "new_str": "x"},
			has:  []string{"insert needs insert_line"}, isError: true},

		{name: "unknown command", args: map[string]any{"command": "delete", "path": "a.txt"},
			has: []string{"command"}, isError: true},
		{name: "no path", args: map[string]any{"command": "view"},
			has: []string{"path"}, isError: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, Options{})
			for name, text := range c.files {
				e.write(t, name, text)
			}
			args := map[string]any{}
			for k, v := range c.args {
				if s, ok := v.(string); ok && k == "path" {
					v = strings.Replace(s, "WORKDIR", e.workdir, 1)
				}
				args[k] = v
			}
			text, isErr := e.call(t, ToolEditor, args)
			if isErr != c.isError {
				t.Fatalf("tool error = %v, want %v: %s", isErr, c.isError, text)
			}
			if c.want != "" && text != c.want {
				t.Errorf("got\n%q\nwant\n%q", text, c.want)
			}
			for _, h := range c.has {
				if !strings.Contains(text, h) {
					t.Errorf("got\n%q\nwant it to contain\n%q", text, h)
				}
			}
			for name, want := range c.after {
				if got := e.file(t, name); got != want {
					t.Errorf("%s holds %q, want %q", name, got, want)
				}
			}
			// No temp file is left beside what was edited.
			_ = filepath.Walk(e.workdir, func(p string, fi os.FileInfo, err error) error {
				if err == nil && strings.Contains(fi.Name(), ".tmp-") {
					t.Errorf("temp file left: %s", p)
				}
				return nil
			})
		})
	}
}

// An edit keeps the file's mode and writes through a symlink to its target.
func TestEditorKeepsModeAndLinks(t *testing.T) {
	e := newEnv(t, Options{})
	e.write(t, "run.sh", "echo a\n")
	if err := os.Chmod(filepath.Join(e.workdir, "run.sh"), 0o751); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("run.sh", filepath.Join(e.workdir, "link.sh")); err != nil {
		t.Fatal(err)
	}
	if text, isErr := e.call(t, ToolEditor, map[string]any{"command": "str_replace", "path": "link.sh", "old_str": "a", "new_str": "b"}); isErr {
		t.Fatal(text)
	}
	fi, err := os.Lstat(filepath.Join(e.workdir, "link.sh"))
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("link.sh is no longer a symlink: %v %v", fi.Mode(), err)
	}
	fi, err = os.Stat(filepath.Join(e.workdir, "run.sh"))
	if err != nil || fi.Mode().Perm() != 0o751 {
		t.Fatalf("run.sh mode %v, want 0751 (%v)", fi.Mode().Perm(), err)
	}
	if got := e.file(t, "run.sh"); got != "echo b\n" {
		t.Errorf("run.sh holds %q", got)
	}
}

// A long file's view is cut with a note that says how to see the rest.
func TestEditorViewCut(t *testing.T) {
	e := newEnv(t, Options{MaxOutput: 200})
	e.write(t, "long.txt", strings.Repeat("line\n", 1000))
	text, isErr := e.call(t, ToolEditor, map[string]any{"command": "view", "path": "long.txt"})
	if isErr {
		t.Fatal(text)
	}
	for _, want := range []string{"     1\tline\n", " bytes cut ...]", "  1000\tline\n", "note: long.txt has 1000 lines; the view was cut: give view_range to see the rest"} {
		if !strings.Contains(text, want) {
			t.Errorf("view lacks %q:\n%s", want, text)
		}
	}
}

// Edits made at once all land: each reads the file another just wrote.
func TestEditorConcurrentEdits(t *testing.T) {
	e := newEnv(t, Options{})
	e.write(t, "list.txt", "")
	const n = 12
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text, isErr := e.call(t, ToolEditor, map[string]any{"command": "insert", "path": "list.txt", "insert_line": 0, "new_str": fmt.Sprintf("item %d", i)})
			if isErr {
				t.Errorf("insert %d: %s", i, text)
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(e.file(t, "list.txt"), "\n"), "\n")
	sort.Strings(lines)
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("item %d", i)
	}
	sort.Strings(want)
	if strings.Join(lines, ",") != strings.Join(want, ",") {
		t.Errorf("list.txt holds %v, want %v", lines, want)
	}
}
