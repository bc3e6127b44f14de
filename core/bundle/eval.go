package bundle

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
)

type evalFile struct {
	Tasks *[]string `toml:"tasks"`
}

// loadEvals reads evals/<name>.toml into splits, sorted by name. Task ids
// must be known (b.tasks set), so with task problems only the eval files'
// own shape is checked.
func loadEvals(dir string, b *Bundle, ps *problems) []*Split {
	root := filepath.Join(dir, "evals")
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		ps.add(root, 0, "cannot read: %v", err)
		return nil
	}
	var splits []*Split
	for _, e := range entries { // ReadDir sorts by name
		name := e.Name()
		file := filepath.Join(root, name)
		switch {
		case strings.HasPrefix(name, "."):
			continue
		case e.IsDir() || !strings.HasSuffix(name, ".toml"):
			ps.add(file, 0, "not an eval file: evals/ holds <name>.toml")
			continue
		}
		split := strings.TrimSuffix(name, ".toml")
		if !validName(split) {
			ps.add(file, 0, "eval name %q: use letters, digits, '.', '_' and '-', starting with a letter or digit", split)
			continue
		}
		if split == SplitAll {
			ps.add(file, 0, "an eval cannot be named %q: that split holds every task", SplitAll)
			continue
		}
		if s := loadEval(split, file, b, ps); s != nil {
			splits = append(splits, s)
		}
	}
	return splits
}

func loadEval(name, file string, b *Bundle, ps *problems) *Split {
	data, err := os.ReadFile(file)
	if err != nil {
		ps.add(file, 0, "cannot read: %v", err)
		return nil
	}
	var f evalFile
	if err := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields().Decode(&f); err != nil {
		reportTOML(file, err, map[string]string{"tasks": "an array of task ids or glob patterns"}, "tasks", ps)
		return nil
	}
	if f.Tasks == nil {
		ps.add(file, 0, "has no \"tasks\": an eval is tasks = [\"task id\", \"family/*\", ...]")
		return nil
	}
	if len(*f.Tasks) == 0 {
		ps.add(file, keyLine(data, "tasks"), "\"tasks\" is empty: an eval needs at least one task")
		return nil
	}
	if b.tasks == nil { // the tasks did not load: ids cannot be checked
		return nil
	}
	s := &Split{Name: name, File: file}
	seen := map[*Task]bool{}
	n := ps.count()
	for _, pat := range *f.Tasks {
		line := valueLine(data, pat)
		if pat == "" {
			ps.add(file, line, "empty task id")
			continue
		}
		add := func(t *Task) {
			if !seen[t] {
				seen[t] = true
				s.Tasks = append(s.Tasks, t)
			}
		}
		if !strings.ContainsAny(pat, `*?[\`) {
			t, ok := b.tasks[pat]
			if !ok {
				ps.add(file, line, "%q names no task%s", pat, b.familyHint(pat))
				continue
			}
			add(t)
			continue
		}
		if _, err := path.Match(pat, ""); err != nil {
			ps.add(file, line, "invalid pattern %q: %v", pat, err)
			continue
		}
		matched := false
		for _, t := range b.Tasks {
			if ok, _ := path.Match(pat, t.ID); ok {
				matched = true
				add(t)
			}
		}
		if !matched {
			ps.add(file, line, "pattern %q matches no task", pat)
		}
	}
	if ps.count() > n {
		return nil
	}
	return s
}

// familyHint suggests "name/*" when an eval names a seeded family.
func (b *Bundle) familyHint(id string) string {
	for _, t := range b.Tasks {
		if t.Family == id && t.SeedsFile != "" {
			return fmt.Sprintf(" (%s is a seeded family: its tasks are %s/<id>; use %q)", id, id, id+"/*")
		}
	}
	return ""
}

// valueLine finds the line of a quoted string in a TOML file (go-toml keeps
// no positions for values).
func valueLine(data []byte, s string) int {
	for _, q := range []string{`"` + s + `"`, `'` + s + `'`} {
		if i := bytes.Index(data, []byte(q)); i >= 0 {
			return bytes.Count(data[:i], []byte("\n")) + 1
		}
	}
	return keyLine(data, "tasks")
}
