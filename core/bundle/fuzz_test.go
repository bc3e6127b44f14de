package bundle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzTaskFile feeds arbitrary task files (and a seeds line) through the
// loader's parse, compile and check: it must never panic, and every
// problem must carry a line inside the file.
func FuzzTaskFile(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/tasks/*.json")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, []byte(`{"id": "a", "level": 1, "target": "<x>", "name": "n"}`))
	}
	f.Add([]byte(`[{"id":"a","type":"verify_answer","turn":"<t>","pattern":"<p>"}]`), []byte(`{"id":"x","t":"a","p":"("}`))
	envs := map[string]*Env{"toy": {Name: "toy"}}
	f.Fuzz(func(t *testing.T, task, seed []byte) {
		ps := &problems{max: 20}
		lines, keys := parseSeeds("s.jsonl", seed, ps)
		root, err := parseJSON(task)
		if err != nil {
			if je, ok := err.(*jsonError); !ok || je.line < 1 || je.line > strings.Count(string(task), "\n")+1 {
				t.Fatalf("parse error %v: not a line of the file", err)
			}
			return
		}
		tm, ok := compileTask("f", "f.json", root, keys, ps)
		if tm == nil {
			return
		}
		tm.base = make([]Step, len(tm.steps))
		for i := range tm.steps {
			tm.base[i] = tm.steps[i].base()
		}
		(&checker{envs: envs, tmpl: tm.steps}).check(tm.base, func(int, string) { ok = false })
		if ok && lines != nil {
			checkSeedKeys(tm, "s.jsonl", lines, ps)
			instantiate(tm, "s.jsonl", lines, envs, ps)
		}
		nlines := strings.Count(string(task), "\n") + 1
		for _, p := range ps.list {
			if p.File == "f.json" && (p.Line < 1 || p.Line > nlines) {
				t.Fatalf("problem %v: line outside the file (%d lines)", p, nlines)
			}
		}
	})
}
