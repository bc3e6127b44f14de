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

// evalSplit is an eval file's task ids, resolved.
type evalSplit struct {
	name, file string
	ids        []string
}

// loadEvals reads evals/<name>.toml, sorted by name, resolving ids and
// patterns against the catalog.
func loadEvals(dir string, cat *catalog, ps *problems) []evalSplit {
	root := filepath.Join(dir, "evals")
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		ps.add(root, 0, "cannot read: %v", err)
		return nil
	}
	var splits []evalSplit
	for _, e := range entries { // ReadDir sorts by name
		name := e.Name()
		file := filepath.Join(root, name)
		switch {
		case strings.HasPrefix(name, "."):
			continue
		case isDirFollowing(e, file) || !strings.HasSuffix(name, ".toml"):
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
		if s, ok := loadEval(split, file, cat, ps); ok {
			splits = append(splits, s)
		}
	}
	return splits
}

func loadEval(name, file string, cat *catalog, ps *problems) (evalSplit, bool) {
	s := evalSplit{name: name, file: file}
	data, err := readBundleFile(file, ps.maxFileBytes)
	if err != nil {
		ps.add(file, 0, "cannot read: %v", err)
		return s, false
	}
	var f evalFile
	if err := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields().Decode(&f); err != nil {
		reportTOML(file, err, map[string]string{"tasks": "an array of task ids or glob patterns"}, "tasks", ps)
		return s, false
	}
	if f.Tasks == nil {
		ps.add(file, 0, "has no \"tasks\": an eval is tasks = [\"task id\", \"family/*\", ...]")
		return s, false
	}
	if len(*f.Tasks) == 0 {
		ps.add(file, keyLine(data, "tasks"), "\"tasks\" is empty: an eval needs at least one task")
		return s, false
	}
	// One entry cannot repeat a task: skip the set (an eval of one glob
	// over a big family is the common case).
	var seen map[string]bool
	if len(*f.Tasks) > 1 {
		seen = map[string]bool{}
	}
	add := func(id string) {
		if seen == nil {
			s.ids = append(s.ids, id)
		} else if !seen[id] {
			seen[id] = true
			s.ids = append(s.ids, id)
		}
	}
	n := ps.count()
	for _, pat := range *f.Tasks {
		line := valueLine(data, pat)
		switch {
		case pat == "":
			ps.add(file, line, "empty task id")
		case !strings.ContainsAny(pat, `*?[\`):
			if !cat.has(pat) {
				ps.add(file, line, "%q names no task%s", pat, cat.familyHint(pat))
				continue
			}
			add(pat)
		default:
			if _, err := path.Match(pat, ""); err != nil {
				ps.add(file, line, "invalid pattern %q: %v", pat, err)
				continue
			}
			matched := false
			for _, id := range cat.ids {
				if ok, _ := path.Match(pat, id); ok {
					matched = true
					add(id)
				}
			}
			if !matched {
				ps.add(file, line, "pattern %q matches no task", pat)
			}
		}
	}
	return s, ps.count() == n
}

// familyHint suggests "name/*" when an eval names a seeded family.
func (c *catalog) familyHint(id string) string {
	if c.seeded[id] {
		return fmt.Sprintf(" (%s is a seeded family: its tasks are %s/<id>; use %q)", id, id, id+"/*")
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
