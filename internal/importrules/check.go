package importrules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path"
	"slices"
	"sort"
	"strings"
)

// Package is one package as go list gives it: its import path, the
// packages its non-test files import, and everything they depend on.
type Package struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// List runs go list on pattern in dir (tests left out).
func List(dir, pattern string, env []string) ([]Package, error) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", pattern)
	cmd.Dir, cmd.Env = dir, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w\n%s", pattern, err, stderr.String())
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p Package
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("decode go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}

// Check holds the packages under module to the table's rows and returns
// what disagrees, one message each, sorted: a package with no row, an
// import its row does not allow, a name or part that names nothing, and
// a name no package of its row imports. page names the table's file in
// the messages.
func Check(page, module string, rows []Row, pkgs []Package) []string {
	c := checker{page: page, module: module + "/", rows: rows}
	for _, p := range pkgs {
		if rel, ok := c.ours(p.ImportPath); ok {
			c.paths = append(c.paths, rel)
		}
	}
	var msgs []string
	report := func(format string, args ...any) { msgs = append(msgs, fmt.Sprintf(format, args...)) }

	// Every name resolves to a folder of the repository.
	allowed := make([][]string, len(rows))
	for i, r := range rows {
		for _, n := range r.Names {
			if dir, ok := c.resolve(r.Parts[0], n); ok {
				allowed[i] = append(allowed[i], dir)
			} else {
				report("%s: row `%s` allows `%s`, which is no folder of packages beside the part, above it or at the top: name a package (`core/bundle`, or `bundle` beside it) or put the note in parentheses",
					c.at(r), r.Label(), n)
			}
		}
	}
	// Every part covers a package, and no part is in two rows.
	owner := map[string]int{}
	for i, r := range rows {
		for _, part := range r.Parts {
			if j, dup := owner[part]; dup {
				report("%s: part `%s` has a row already (%s): merge the two", c.at(r), part, c.at(rows[j]))
			}
			owner[part] = i
			if !slices.ContainsFunc(c.paths, func(p string) bool { _, ok := covers(part, p); return ok }) {
				report("%s: part `%s` covers no package: the folder is gone or was renamed; fix or drop the row", c.at(r), part)
			}
		}
	}
	used := make([]map[string]bool, len(rows))
	for i := range used {
		used[i] = map[string]bool{}
	}
	for _, p := range pkgs {
		rel, ok := c.ours(p.ImportPath)
		if !ok {
			continue
		}
		i, own := c.rowOf(rel)
		if i < 0 {
			report("%s: package %s has no row in the parts table: add one (or a row for a folder above it) saying what it holds and may import", page, rel)
			continue
		}
		r := rows[i]
		for _, imp := range p.Imports {
			d, ok := c.ours(imp)
			if !ok {
				continue
			}
			// The row's own folder is free, but not a folder below it
			// with a row of its own: that import the column names.
			if j, _ := c.rowOf(d); under(d, own) && j == i {
				continue
			}
			hit := false
			for _, a := range allowed[i] {
				if under(d, a) {
					used[i][a], hit = true, true
				}
			}
			if !hit {
				report("%s: %s imports %s, which row `%s` does not allow: remove the import, or add `%s` to the row's \"may import\" column if the layering allows it",
					c.at(r), rel, d, r.Label(), d)
			}
		}
	}
	// A name no package of the row imports is a column that says more
	// than the code.
	for i, r := range rows {
		for _, a := range allowed[i] {
			if !used[i][a] {
				report("%s: row `%s` allows `%s`, but none of its packages imports it: drop it from the column", c.at(r), r.Label(), a)
			}
		}
	}
	sort.Strings(msgs)
	return slices.Compact(msgs)
}

type checker struct {
	page, module string
	rows         []Row
	paths        []string // the repository's packages, relative to module
}

func (c *checker) at(r Row) string { return fmt.Sprintf("%s:%d", c.page, r.Line) }

// ours is p relative to the module when it is one of the repository's.
func (c *checker) ours(p string) (string, bool) {
	if !strings.HasPrefix(p, c.module) {
		return "", false
	}
	return strings.TrimPrefix(p, c.module), true
}

// rowOf is the row whose part covers rel most closely (most segments, then
// fewest patterns), and the folder rel may import freely: the part's
// folder, or the one plugin's for a pattern part. -1 when none covers it.
func (c *checker) rowOf(rel string) (row int, own string) {
	row, best, fewest := -1, -1, 0
	for i, r := range c.rows {
		for _, part := range r.Parts {
			o, ok := covers(part, rel)
			if !ok {
				continue
			}
			n, pats := len(strings.Split(part, "/")), strings.Count(part, "<")
			if n > best || n == best && pats < fewest {
				row, own, best, fewest = i, o, n, pats
			}
		}
	}
	return row, own
}

// resolve finds the folder name stands for in part's row: beside the
// part, or beside a folder above it, or from the top.
func (c *checker) resolve(part, name string) (string, bool) {
	if name == "" || strings.ContainsAny(name, "<> ") {
		return "", false
	}
	for d := path.Dir(part); ; d = path.Dir(d) {
		cand := name
		if d != "." && d != "/" {
			cand = d + "/" + name
		}
		if !strings.Contains(cand, "<") && slices.ContainsFunc(c.paths, func(p string) bool { return under(p, cand) }) {
			return cand, true
		}
		if d == "." || d == "/" {
			return "", false
		}
	}
}

// covers says whether part (segments like "<kind>-<name>" match any one)
// covers the package rel, and returns the folder of rel the part matched.
func covers(part, rel string) (string, bool) {
	ps, rs := strings.Split(part, "/"), strings.Split(rel, "/")
	if len(ps) > len(rs) {
		return "", false
	}
	for i, s := range ps {
		if s != rs[i] && !strings.Contains(s, "<") {
			return "", false
		}
	}
	return strings.Join(rs[:len(ps)], "/"), true
}

// under reports whether p is dir or inside it.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}
