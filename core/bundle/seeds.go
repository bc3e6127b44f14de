package bundle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
)

// seedLine is one line of a seeds file.
type seedLine struct {
	line     int
	off, end int // the line's bytes in the file
	id       string
	vals     map[string]any
	bad      bool // has a problem; makes no task
	dup      bool // repeats an earlier line's id
}

// parseSeeds decodes every line of a seeds file, in parallel: on a big
// family this is most of the load time. It returns the lines and the union
// of their keys (the names placeholders may use).
func parseSeeds(file string, data []byte, ps *problems) ([]seedLine, map[string]bool) {
	lines := make([]seedLine, 0, bytes.Count(data, []byte("\n"))+1)
	for n, start := 1, 0; start < len(data); n++ {
		end := bytes.IndexByte(data[start:], '\n')
		if end < 0 {
			end = len(data) - start
		}
		if len(bytes.TrimSpace(data[start:start+end])) > 0 {
			lines = append(lines, seedLine{line: n, off: start, end: start + end})
		}
		start += end + 1
	}
	if len(lines) == 0 {
		ps.add(file, 0, "no seed lines: remove the file or add one JSON object per line")
		return nil, nil
	}
	parts := parallel(len(lines), ps.max, func(lo, hi int, wp *problems) {
		for i := lo; i < hi; i++ {
			decodeSeed(file, data[lines[i].off:lines[i].end], &lines[i], wp)
		}
	})
	for _, p := range parts {
		ps.merge(p)
	}
	// Keys seen on every line are found from the first good one; only
	// lines with other keys add to the union.
	keys := map[string]bool{}
	first := make(map[string]int, len(lines))
	for i := range lines {
		l := &lines[i]
		if l.vals == nil {
			continue
		}
		if len(l.vals) != len(keys) || !hasKeys(l.vals, keys) {
			for k := range l.vals {
				keys[k] = true
			}
		}
		if l.id == "" {
			continue
		}
		if at, dup := first[l.id]; dup {
			ps.add(file, l.line, "duplicate seed id %q (first on line %d)", l.id, at)
			l.bad, l.dup = true, true
			continue
		}
		first[l.id] = l.line
	}
	return lines, keys
}

func hasKeys(vals map[string]any, keys map[string]bool) bool {
	for k := range vals {
		if !keys[k] {
			return false
		}
	}
	return true
}

func decodeSeed(file string, raw []byte, l *seedLine, ps *problems) {
	l.bad = true
	vals, err := decodeSeedObject(raw)
	if err != nil {
		ps.add(file, l.line, "%v", err)
		return
	}
	l.vals = vals
	switch id := vals["id"].(type) {
	case nil:
		ps.add(file, l.line, "has no \"id\" (each line needs one; its task is <name>/<id>)")
		return
	case string:
		l.id = id
	case json.Number:
		l.id = string(id)
	default:
		ps.add(file, l.line, "\"id\" must be a string or a number")
		return
	}
	if !validName(l.id) {
		ps.add(file, l.line, "id %q: use letters, digits, '.', '_' and '-', starting with a letter or digit", l.id)
		return
	}
	l.bad = false
}

// instantiate makes one task per good seed line of a compiled, checked
// template, checking what the seeds change.
func instantiate(t *taskTmpl, seedsFile string, lines []seedLine, envs map[string]*Env, ps *problems) []*Task {
	tasks := make([]*Task, len(lines))
	tsFixed := ""
	if !t.toolsetDyn() {
		tsFixed = toolsetKey(t.base)
	}
	parts := parallel(len(lines), ps.max, func(lo, hi int, wp *problems) {
		c := &checker{envs: envs, tmpl: t.steps, instance: true, rx: map[string]rxEntry{}}
		// One allocation for all the tasks of a chunk and their steps.
		block := make([]Task, hi-lo)
		stepBlock := make([]Step, (hi-lo)*len(t.base))
		for i := lo; i < hi; i++ {
			l := &lines[i]
			if l.bad {
				continue
			}
			task := &block[i-lo]
			task.ID = t.name + "/" + l.id
			task.Family, task.File, task.Line, task.SeedsFile, task.Seed = t.name, t.file, l.line, seedsFile, l.vals
			steps := stepBlock[(i-lo)*len(t.base) : (i-lo+1)*len(t.base) : (i-lo+1)*len(t.base)]
			copy(steps, t.base)
			for j := range t.steps {
				if t.steps[j].dyn != 0 {
					t.steps[j].fill(&steps[j], l.vals)
				}
			}
			ok := true
			c.check(steps, func(j int, msg string) {
				ok = false
				where := t.file
				if j >= 0 {
					where = fmt.Sprintf("%s:%d", t.file, steps[j].Line)
				}
				wp.add(seedsFile, l.line, "task %s: %s (template %s)", task.ID, msg, where)
			})
			if !ok {
				continue
			}
			task.Steps = steps
			task.Toolset = tsFixed
			if tsFixed == "" {
				task.Toolset = toolsetKey(steps)
			}
			tasks[i] = task
		}
	})
	for _, p := range parts {
		ps.merge(p)
	}
	out := tasks[:0]
	for _, t := range tasks {
		if t != nil {
			out = append(out, t)
		}
	}
	return out
}

// checkSeedKeys marks the lines lacking a key the template's placeholders
// use.
func checkSeedKeys(t *taskTmpl, seedsFile string, lines []seedLine, ps *problems) {
	if len(t.used) == 0 {
		return
	}
	for i := range lines {
		l := &lines[i]
		if l.vals == nil {
			continue
		}
		if missing := missingKeys(t.used, l.vals); missing != "" {
			ps.add(seedsFile, l.line, "seed %q has no value for %s, used in %s", l.id, missing, t.file)
			l.bad = true
		}
	}
}

func missingKeys(used []string, vals map[string]any) string {
	var missing []string
	for _, k := range used {
		if _, ok := vals[k]; !ok {
			missing = append(missing, "<"+k+">")
		}
	}
	sort.Strings(missing)
	return strings.Join(missing, ", ")
}

// parallel runs fn over [0,n) in chunks on every CPU, each chunk with its
// own problems list, returned in chunk order.
func parallel(n, maxProblems int, fn func(lo, hi int, ps *problems)) []*problems {
	workers := runtime.GOMAXPROCS(0)
	if n < 2048 || workers < 2 {
		workers = 1
	}
	chunk := (n + workers - 1) / workers
	out := make([]*problems, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := w*chunk, min((w+1)*chunk, n)
		out[w] = &problems{max: maxProblems}
		if lo >= hi {
			continue
		}
		wg.Add(1)
		go func(p *problems) {
			defer wg.Done()
			fn(lo, hi, p)
		}(out[w])
	}
	wg.Wait()
	return out
}
