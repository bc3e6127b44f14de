package terminal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/agentenv/agentenv/core/tempfile"
)

type editorIn struct {
	Command    string  `json:"command"`
	Path       string  `json:"path"`
	FileText   *string `json:"file_text,omitempty"`
	OldStr     *string `json:"old_str,omitempty"`
	NewStr     *string `json:"new_str,omitempty"`
	InsertLine *int    `json:"insert_line,omitempty"`
	ViewRange  []int   `json:"view_range,omitempty"`
}

// maxEditFile bounds the files the editor reads whole; larger ones are for
// the shell (head, sed, grep).
const maxEditFile = 32 << 20

// maxListing bounds a folder view.
const maxListing = 1000

// snippetContext is the lines shown around an edit.
const snippetContext = 4

func (s *Server) editor(_ context.Context, in editorIn) (string, error) {
	if strings.TrimSpace(in.Path) == "" {
		return "", errors.New("path is empty: give a file or folder path")
	}
	p := s.path(in.Path)
	switch in.Command {
	case "view":
		return s.view(in.Path, p, in.ViewRange)
	case "create":
		if in.FileText == nil {
			return "", errors.New("create needs file_text: the whole content of the file")
		}
		return s.create(in.Path, p, *in.FileText)
	case "str_replace":
		if in.OldStr == nil || *in.OldStr == "" {
			return "", errors.New("str_replace needs old_str: the exact text to replace")
		}
		return s.strReplace(in.Path, p, *in.OldStr, deref(in.NewStr))
	case "insert":
		if in.InsertLine == nil {
			return "", errors.New("insert needs insert_line: the line after which new_str goes (0 = the top)")
		}
		if in.NewStr == nil {
			return "", errors.New("insert needs new_str: the lines to insert")
		}
		return s.insert(in.Path, p, *in.InsertLine, *in.NewStr)
	}
	return "", fmt.Errorf("unknown command %q: use view, create, str_replace or insert", in.Command)
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (s *Server) view(name, p string, viewRange []int) (string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", pathError(name, err)
	}
	if fi.IsDir() {
		if viewRange != nil {
			return "", fmt.Errorf("%s is a folder: view_range applies to files only", name)
		}
		return s.listing(name, p)
	}
	data, err := readText(name, p, fi)
	if err != nil {
		return "", err
	}
	lines := splitLines(string(data))
	first, last := 1, len(lines)
	if viewRange != nil {
		if len(viewRange) != 2 {
			return "", fmt.Errorf("view_range must be [first, last], got %d numbers", len(viewRange))
		}
		first, last = viewRange[0], viewRange[1]
		if last == -1 || last > len(lines) {
			last = len(lines)
		}
		if first < 1 || first > len(lines) {
			return "", fmt.Errorf("view_range first line %d is outside %s, which has %d lines", viewRange[0], name, len(lines))
		}
		if last < first {
			return "", fmt.Errorf("view_range [%d, %d]: the last line is before the first", viewRange[0], viewRange[1])
		}
	}
	if len(lines) == 0 {
		return fmt.Sprintf("%s is empty", name), nil
	}
	buf := newBoundedBuffer(s.opts.MaxOutput)
	writeNumbered(buf, lines[first-1:last], first)
	text, cut := buf.text()
	if cut > 0 {
		text += fmt.Sprintf("\nnote: %s has %d lines; the view was cut: give view_range to see the rest\n", name, len(lines))
	}
	return text, nil
}

// listing is a folder's entries two levels deep, hidden ones skipped,
// folders ending in /.
func (s *Server) listing(name, p string) (string, error) {
	var entries []string
	more := 0
	err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if path == p {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(p, path)
		depth := strings.Count(rel, string(filepath.Separator)) + 1
		if len(entries) >= maxListing {
			more++
		} else if d.IsDir() {
			entries = append(entries, rel+"/")
		} else {
			entries = append(entries, rel)
		}
		if d.IsDir() && (depth >= 2 || err != nil) {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return "", pathError(name, err)
	}
	sort.Strings(entries)
	var b strings.Builder
	fmt.Fprintf(&b, "%s (folder; entries two levels deep, hidden ones skipped):\n", name)
	if len(entries) == 0 {
		b.WriteString("(empty)\n")
	}
	for _, e := range entries {
		b.WriteString(e + "\n")
	}
	if more > 0 {
		fmt.Fprintf(&b, "[... %d more entries not shown: list a subfolder]\n", more)
	}
	return b.String(), nil
}

func (s *Server) create(name, p, text string) (string, error) {
	s.editMu.Lock()
	defer s.editMu.Unlock()
	verb := "Created"
	if fi, err := os.Stat(p); err == nil {
		if fi.IsDir() {
			return "", fmt.Errorf("%s is a folder: give a file path", name)
		}
		verb = "Overwrote"
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", pathError(name, err)
	}
	if err := writeFile(p, []byte(text)); err != nil {
		return "", pathError(name, err)
	}
	return fmt.Sprintf("%s %s (%d lines)", verb, name, len(splitLines(text))), nil
}

func (s *Server) strReplace(name, p, old, repl string) (string, error) {
	s.editMu.Lock()
	defer s.editMu.Unlock()
	data, err := readEditable(name, p)
	if err != nil {
		return "", err
	}
	text := string(data)
	switch n := strings.Count(text, old); {
	case n == 0:
		return "", fmt.Errorf("old_str was not found in %s; nothing changed. View the file and copy the text exactly, whitespace and indentation included (no line numbers)", name)
	case n > 1:
		return "", fmt.Errorf("old_str occurs %d times in %s (lines %s); nothing changed. Include more surrounding lines in old_str so it matches one place only", n, name, matchLines(text, old))
	}
	i := strings.Index(text, old)
	updated := text[:i] + repl + text[i+len(old):]
	if err := writeFile(p, []byte(updated)); err != nil {
		return "", pathError(name, err)
	}
	first := strings.Count(text[:i], "\n") + 1
	last := first + strings.Count(strings.TrimSuffix(repl, "\n"), "\n")
	return fmt.Sprintf("Edited %s. Lines %d-%d now read:\n%s", name, max(first-snippetContext, 1),
		min(last+snippetContext, len(splitLines(updated))), snippet(updated, first, last)), nil
}

func (s *Server) insert(name, p string, after int, text string) (string, error) {
	s.editMu.Lock()
	defer s.editMu.Unlock()
	data, err := readEditable(name, p)
	if err != nil {
		return "", err
	}
	lines := splitLines(string(data))
	if after < 0 || after > len(lines) {
		return "", fmt.Errorf("insert_line %d is outside %s, which has %d lines: give 0 to %d", after, name, len(lines), len(lines))
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if after == len(lines) && after > 0 && !strings.HasSuffix(lines[after-1], "\n") {
		lines[after-1] += "\n" // the file ended without a newline
	}
	updated := strings.Join(lines[:after], "") + text + strings.Join(lines[after:], "")
	if err := writeFile(p, []byte(updated)); err != nil {
		return "", pathError(name, err)
	}
	first := after + 1
	last := after + strings.Count(text, "\n")
	return fmt.Sprintf("Inserted %d lines into %s after line %d. Lines %d-%d now read:\n%s", last-after, name, after,
		max(first-snippetContext, 1), min(last+snippetContext, len(splitLines(updated))), snippet(updated, first, last)), nil
}

// splitLines splits text into lines, each keeping its "\n"; the last may
// lack one.
func splitLines(text string) []string {
	if text == "" {
		return nil
	}
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// writeNumbered writes lines numbered from first, as cat -n does.
func writeNumbered(w interface{ Write([]byte) (int, error) }, lines []string, first int) {
	for i, l := range lines {
		fmt.Fprintf(w, "%6d\t%s", first+i, l)
		if !strings.HasSuffix(l, "\n") {
			fmt.Fprint(w, "\n")
		}
	}
}

// snippet is lines first..last of text with snippetContext lines around.
func snippet(text string, first, last int) string {
	lines := splitLines(text)
	from := max(first-snippetContext, 1)
	to := min(last+snippetContext, len(lines))
	var b bytes.Buffer
	if from <= to {
		writeNumbered(&b, lines[from-1:to], from)
	}
	return b.String()
}

// matchLines lists the lines where old starts in text.
func matchLines(text, old string) string {
	var at []string
	off := 0
	for {
		i := strings.Index(text[off:], old)
		if i < 0 || len(at) == 10 {
			break
		}
		at = append(at, fmt.Sprint(strings.Count(text[:off+i], "\n")+1))
		off += i + 1
	}
	return strings.Join(at, ", ")
}

// readEditable reads a text file the editor may change.
func readEditable(name, p string) ([]byte, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, pathError(name, err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%s is a folder: give a file path", name)
	}
	return readText(name, p, fi)
}

func readText(name, p string, fi os.FileInfo) ([]byte, error) {
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	if fi.Size() > maxEditFile {
		return nil, fmt.Errorf("%s is %d bytes, over the editor's %d MB: use the shell (head, sed -n, grep)", name, fi.Size(), maxEditFile>>20)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, pathError(name, err)
	}
	if bytes.IndexByte(data[:min(len(data), 8192)], 0) >= 0 {
		return nil, fmt.Errorf("%s looks binary (it holds NUL bytes): inspect it with the shell (file, xxd, od)", name)
	}
	return data, nil
}

// writeFile replaces the file at p (following a symlink to its target)
// through a temp file, so a reader never sees it half written; an existing
// file keeps its mode and, where allowed, its owner.
func writeFile(p string, data []byte) error {
	if target, err := filepath.EvalSymlinks(p); err == nil {
		p = target
	}
	mode := os.FileMode(0o644)
	var owner *syscall.Stat_t
	if fi, err := os.Stat(p); err == nil {
		mode = fi.Mode().Perm()
		owner, _ = fi.Sys().(*syscall.Stat_t)
	}
	dir, base := filepath.Split(p)
	f, err := tempfile.Create(dir, base)
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	if owner != nil {
		_ = os.Lchown(tmp, int(owner.Uid), int(owner.Gid)) // only root may; others keep theirs anyway
	}
	return os.Rename(tmp, p)
}

// pathError says what is wrong with a path in words a model acts on,
// naming the path as the caller gave it.
func pathError(name string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist", name)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: permission denied", name)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %s failed: %v", name, pe.Op, pe.Err)
	}
	return fmt.Errorf("%s: %v", name, err)
}
