package bundle

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// One mistake is reported once: what it breaks is not reported again.
func TestOneMistakeOneProblem(t *testing.T) {
	cases := []struct {
		name    string
		changes map[string]string
		want    string // the only problem, as file:line: msg without the bundle folder
	}{
		{"misspelt deploy type", map[string]string{"tasks/play.json": task(
			`{"id": "env", "type": "deploy-env", "env": "toy"}`, prompt, grade)},
			`tasks/play.json:2: step "env": unknown step type "deploy-env" (known: deploy_env, call_tool, prompt_agent, verify_tool, verify_answer, verify_command)`},
		{"misspelt prompt type", map[string]string{"tasks/play.json": task(deploy,
			`{"id": "play", "type": "prompt", "prompt": "Go."}`, grade, `{"id": "a", "type": "verify_answer", "turn": "play", "expected": "x"}`)},
			`tasks/play.json:3: step "play": unknown step type "prompt" (known: deploy_env, call_tool, prompt_agent, verify_tool, verify_answer, verify_command)`},
		{"prompt of the wrong type", map[string]string{"tasks/play.json": playJSON(`{"id": "play", "type": "prompt_agent", "prompt": 42}`)},
			`tasks/play.json:3: step "play": "prompt" must be a string, got a number`},
		{"env id of the wrong type", map[string]string{"tasks/play.json": task(`{"id": "env", "type": "deploy_env", "env": ["toy"]}`, prompt, grade)},
			`tasks/play.json:2: step "env": "env" must be a string, got an array`},
		{"broken env.toml", map[string]string{"envs/toy/env.toml": "command = \"bin/toy\"\n"},
			`envs/toy/env.toml:1: "command" must be an array of strings, got a TOML string`},
		{"broken task named by an eval", map[string]string{"tasks/play.json": "[\n  {\n"},
			`tasks/play.json:3: invalid JSON: unexpected end of file`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeBundle(t, baseBundle, tc.changes)
			_, err := Load(dir, Options{})
			var le *LoadError
			if !errors.As(err, &le) {
				t.Fatalf("want a *LoadError, got %v", err)
			}
			var got []string
			for _, p := range le.Problems {
				got = append(got, strings.TrimPrefix(p.String(), dir+string(filepath.Separator)))
			}
			if !reflect.DeepEqual(got, []string{tc.want}) {
				t.Errorf("problems:\n  %s\nwant only:\n  %s", strings.Join(got, "\n  "), tc.want)
			}
		})
	}
}

// The error example of docs/bundles.md, reproduced on testdata/quiz.
func TestDocsErrorExample(t *testing.T) {
	files := map[string]string{}
	root := "testdata/quiz"
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	b := mustLoad(t, root)
	if got := taskIDs(b.Tasks); !reflect.DeepEqual(got, []string{"level/l1", "level/l2", "level/l3", "solve"}) {
		t.Errorf("quiz tasks %v", got)
	}
	edit := func(name, old, new string) {
		if !strings.Contains(files[name], old) {
			t.Fatalf("%s has no %q", name, old)
		}
		files[name] = strings.Replace(files[name], old, new, 1)
	}
	edit("envs/board/env.toml", "port = ", "ports = ")
	edit("evals/test.toml", `"solve"`, `"solv"`)
	edit("tasks/level.seeds.jsonl", `, "target": 30`, "")
	edit("tasks/solve.json", `"prompt": "Reach`, `"tool": "x", "prompt": "Reach`)
	edit("tasks/solve.json", `"turn": "play"`, `"turn": "paly"`)
	dir := writeBundle(t, files, nil)
	_, err = Load(dir, Options{})
	want := `bundle ` + dir + `: 5 problems
  ` + dir + `/envs/board/env.toml:3: unknown key "ports" (keys: image, command, build, port, env, cpu, memory_mb, reuse, reset_tool)
  ` + dir + `/evals/test.toml:1: "solv" names no task
  ` + dir + `/tasks/level.seeds.jsonl:3: seed "l3" has no value for <target>, used in ` + dir + `/tasks/level.json
  ` + dir + `/tasks/solve.json:6: step "play": key "tool" does not belong on a prompt_agent step (it takes: id, type, system_prompt, prompt, tools, max_turns)
  ` + dir + `/tasks/solve.json:8: step "answer": turn "paly" names no step of this task (prompt_agent steps: play)`
	if err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
}
