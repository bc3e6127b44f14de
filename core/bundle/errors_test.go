package bundle

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// baseBundle is a valid bundle the error cases change one file of.
var baseBundle = map[string]string{
	"README.md":          "# t\n\nA test bundle.\n",
	"envs/toy/env.toml":  "command = [\"bin/toy\"]\n",
	"tasks/play.json":    playJSON(`{"id": "play", "type": "prompt_agent", "prompt": "Go."}`),
	"evals/train.toml":   "tasks = [\"play\"]\n",
	"tasks/.hidden.json": "not read: dot files are ignored",
}

// playJSON is a task whose line 3 is the given step.
func playJSON(step string) string {
	return "[\n" +
		`  {"id": "env", "type": "deploy_env", "env": "toy"},` + "\n" +
		"  " + step + ",\n" +
		`  {"id": "grade", "type": "verify_tool", "tool": "grade"}` + "\n]\n"
}

// task joins steps one per line from line 2.
func task(steps ...string) string {
	return "[\n  " + strings.Join(steps, ",\n  ") + "\n]\n"
}

const (
	deploy = `{"id": "env", "type": "deploy_env", "env": "toy"}`
	prompt = `{"id": "play", "type": "prompt_agent", "prompt": "Go."}`
	grade  = `{"id": "grade", "type": "verify_tool", "tool": "grade"}`
	del    = "\x00delete"
)

// writeBundle writes base with changes applied (del removes a file).
func writeBundle(t *testing.T, base, changes map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "b")
	files := map[string]string{}
	for k, v := range base {
		files[k] = v
	}
	for k, v := range changes {
		files[k] = v
	}
	for name, body := range files {
		if body == del {
			continue
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadErrors(t *testing.T) {
	seeded := map[string]string{
		"tasks/lvl.json": task(deploy,
			`{"id": "setup", "type": "call_tool", "tool": "setup", "arguments": {"level": "<level>"}}`,
			`{"id": "play", "type": "prompt_agent", "prompt": "Level <level>."}`,
			`{"id": "ans", "type": "verify_answer", "turn": "play", "pattern": "<pat>"}`),
		"tasks/lvl.seeds.jsonl": "{\"id\": \"a\", \"level\": 1, \"pat\": \"^1$\"}\n{\"id\": \"b\", \"level\": 2, \"pat\": \"^2$\"}\n",
	}
	with := func(extra map[string]string, more map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range extra {
			out[k] = v
		}
		for k, v := range more {
			out[k] = v
		}
		return out
	}
	cases := []struct {
		name    string
		changes map[string]string
		file    string // relative to the bundle
		line    int    // 0: the message names the file without a line
		want    string
	}{
		// JSON shape
		{"invalid JSON", map[string]string{"tasks/play.json": "[\n  {\"id\": \"env\",\n   \"type\" \"deploy_env\"}\n]\n"}, "tasks/play.json", 3, "invalid JSON"},
		{"truncated JSON", map[string]string{"tasks/play.json": "[\n  {\"id\": \"env\"\n"}, "tasks/play.json", 3, "unexpected end of file"},
		{"not an array", map[string]string{"tasks/play.json": "\n{\"id\": \"env\"}\n"}, "tasks/play.json", 2, "must be a JSON array of steps, got an object"},
		{"empty task", map[string]string{"tasks/play.json": "[]"}, "tasks/play.json", 1, "the task has no steps"},
		{"data after array", map[string]string{"tasks/play.json": "[" + prompt + "]\n[]\n"}, "tasks/play.json", 2, "unexpected data after the top-level value"},
		{"step not object", map[string]string{"tasks/play.json": playJSON(`"play"`)}, "tasks/play.json", 3, "step #2 must be a JSON object, got a string"},
		{"duplicate JSON key", map[string]string{"tasks/play.json": playJSON(`{"id": "play", "type": "prompt_agent", "prompt": "a", "prompt": "b"}`)}, "tasks/play.json", 3, `duplicate key "prompt"`},
		// keys and types
		{"unknown key", map[string]string{"tasks/play.json": playJSON(`{"id": "play", "type": "prompt_agent", "prompt": "Go.", "colour": "red"}`)}, "tasks/play.json", 3, `unknown key "colour" (a prompt_agent step takes: id, type, system_prompt, prompt, tools, max_turns)`},
		{"key of another type", map[string]string{"tasks/play.json": playJSON(`{"id": "play", "type": "prompt_agent", "prompt": "Go.", "tool": "x"}`)}, "tasks/play.json", 3, `key "tool" does not belong on a prompt_agent step`},
		{"unknown step type", map[string]string{"tasks/play.json": playJSON(`{"id": "play", "type": "prompt_model", "prompt": "Go."}`)}, "tasks/play.json", 3, `unknown step type "prompt_model"`},
		{"no type", map[string]string{"tasks/play.json": playJSON(`{"id": "play", "prompt": "Go."}`)}, "tasks/play.json", 3, `step "play": has no "type"`},
		{"type not a string", map[string]string{"tasks/play.json": playJSON(`{"id": "play", "type": 3}`)}, "tasks/play.json", 3, `"type" must be a string, got a number`},
		{"no id", map[string]string{"tasks/play.json": playJSON(`{"type": "prompt_agent", "prompt": "Go."}`)}, "tasks/play.json", 3, `step #2: has no "id"`},
		{"bad id", map[string]string{"tasks/play.json": playJSON(`{"id": "my play", "type": "prompt_agent", "prompt": "Go."}`)}, "tasks/play.json", 3, `id "my play": use letters`},
		{"duplicate step id", map[string]string{"tasks/play.json": playJSON(`{"id": "env", "type": "prompt_agent", "prompt": "Go."}`)}, "tasks/play.json", 3, `step "env": duplicate step id (step #1, line 2, has it too)`},
		{"prompt not a string", map[string]string{"tasks/play.json": playJSON(`{"id": "play", "type": "prompt_agent", "prompt": ["Go."]}`)}, "tasks/play.json", 3, `"prompt" must be a string, got an array`},
		{"tools not strings", map[string]string{"tasks/play.json": playJSON(`{"id": "play", "type": "prompt_agent", "prompt": "Go.", "tools": [1]}`)}, "tasks/play.json", 3, `"tools" must be an array of strings, found a number`},
		{"arguments not object", map[string]string{"tasks/play.json": task(deploy, `{"id": "s", "type": "call_tool", "tool": "t", "arguments": [1]}`, prompt, grade)}, "tasks/play.json", 3, `"arguments" must be a JSON object, got an array`},
		{"max_turns zero", map[string]string{"tasks/play.json": playJSON(`{"id": "play", "type": "prompt_agent", "prompt": "Go.", "max_turns": 0}`)}, "tasks/play.json", 3, `"max_turns" must be a whole number of at least 1`},
		{"max_turns fraction", map[string]string{"tasks/play.json": playJSON(`{"id": "play", "type": "prompt_agent", "prompt": "Go.", "max_turns": 2.5}`)}, "tasks/play.json", 3, `"max_turns" must be a whole number`},
		// required fields and references
		{"prompt missing", map[string]string{"tasks/play.json": playJSON(`{"id": "play", "type": "prompt_agent"}`)}, "tasks/play.json", 3, `step "play": has no "prompt"`},
		{"prompt empty", map[string]string{"tasks/play.json": playJSON(`{"id": "play", "type": "prompt_agent", "prompt": ""}`)}, "tasks/play.json", 3, `has an empty "prompt"`},
		{"deploy without env", map[string]string{"tasks/play.json": task(`{"id": "env", "type": "deploy_env"}`, prompt, grade)}, "tasks/play.json", 2, `step "env": has no "env" (the env to deploy; envs: toy)`},
		{"missing env", map[string]string{"tasks/play.json": task(`{"id": "env", "type": "deploy_env", "env": "nope"}`, prompt, grade)}, "tasks/play.json", 2, `names env "nope", which the bundle does not have (envs: toy)`},
		{"env deployed twice", map[string]string{"tasks/play.json": task(deploy, `{"id": "env2", "type": "deploy_env", "env": "toy"}`, prompt, grade)}, "tasks/play.json", 3, `deploys env "toy" a second time`},
		{"call_tool before deploy", map[string]string{"tasks/play.json": task(`{"id": "s", "type": "call_tool", "tool": "t"}`, deploy, prompt, grade)}, "tasks/play.json", 2, `step "s": comes before any deploy_env step`},
		{"verify_tool before deploy", map[string]string{"tasks/play.json": task(prompt, `{"id": "g", "type": "verify_tool", "tool": "grade"}`)}, "tasks/play.json", 3, `step "g": comes before any deploy_env step`},
		{"verify_command before deploy", map[string]string{"tasks/play.json": task(prompt, `{"id": "c", "type": "verify_command", "command": ["true"]}`)}, "tasks/play.json", 3, `step "c": comes before any deploy_env step`},
		{"call_tool without tool", map[string]string{"tasks/play.json": task(deploy, `{"id": "s", "type": "call_tool"}`, prompt, grade)}, "tasks/play.json", 3, `step "s": has no "tool"`},
		{"call_tool env not deployed", map[string]string{
			"envs/other/env.toml": "image = \"other:1\"\n",
			"tasks/play.json":     task(deploy, `{"id": "s", "type": "call_tool", "tool": "t", "env": "other"}`, prompt, grade)}, "tasks/play.json", 3, `names env "other", which no earlier deploy_env step deploys (deployed: toy)`},
		{"several envs, none named", map[string]string{
			"envs/other/env.toml": "image = \"other:1\"\n",
			"tasks/play.json":     task(deploy, `{"id": "env2", "type": "deploy_env", "env": "other"}`, prompt, grade)}, "tasks/play.json", 5, `step "grade": several envs are deployed (toy, other): name one with "env"`},
		{"verify_command without command", map[string]string{"tasks/play.json": task(deploy, prompt, `{"id": "c", "type": "verify_command"}`)}, "tasks/play.json", 4, `step "c": has no "command"`},
		{"verify_command empty command", map[string]string{"tasks/play.json": task(deploy, prompt, `{"id": "c", "type": "verify_command", "command": []}`)}, "tasks/play.json", 4, `has an empty "command"`},
		{"turn names no step", map[string]string{"tasks/play.json": task(prompt, `{"id": "a", "type": "verify_answer", "turn": "plya", "expected": "x"}`)}, "tasks/play.json", 3, `turn "plya" names no step of this task (prompt_agent steps: play)`},
		{"turn not a prompt", map[string]string{"tasks/play.json": task(deploy, prompt, `{"id": "a", "type": "verify_answer", "turn": "env", "expected": "x"}`)}, "tasks/play.json", 4, `turn "env" is a deploy_env step, not a prompt_agent step`},
		{"turn after check", map[string]string{"tasks/play.json": task(`{"id": "a", "type": "verify_answer", "turn": "play", "expected": "x"}`, prompt)}, "tasks/play.json", 2, `turn "play" comes after this step`},
		{"turn missing", map[string]string{"tasks/play.json": task(prompt, `{"id": "a", "type": "verify_answer", "expected": "x"}`)}, "tasks/play.json", 3, `has no "turn"`},
		{"pattern and expected", map[string]string{"tasks/play.json": task(prompt, `{"id": "a", "type": "verify_answer", "turn": "play", "expected": "x", "pattern": "x"}`)}, "tasks/play.json", 3, `has both "pattern" and "expected"`},
		{"neither pattern nor expected", map[string]string{"tasks/play.json": task(prompt, `{"id": "a", "type": "verify_answer", "turn": "play"}`)}, "tasks/play.json", 3, `needs "pattern" (a regular expression) or "expected"`},
		{"invalid regex", map[string]string{"tasks/play.json": task(prompt, `{"id": "a", "type": "verify_answer", "turn": "play", "pattern": "(4"}`)}, "tasks/play.json", 3, `invalid pattern "(4": error parsing regexp: missing closing )`},
		{"tools name end_turn", map[string]string{"tasks/play.json": playJSON(`{"id": "play", "type": "prompt_agent", "prompt": "Go.", "tools": ["end_turn"]}`)}, "tasks/play.json", 3, `"tools" names "end_turn", which is reserved`},
		{"tools twice", map[string]string{"tasks/play.json": playJSON(`{"id": "play", "type": "prompt_agent", "prompt": "Go.", "tools": ["a", "a"]}`)}, "tasks/play.json", 3, `"tools" names "a" twice`},
		{"tools without env", map[string]string{"tasks/play.json": task(`{"id": "play", "type": "prompt_agent", "prompt": "Go.", "tools": ["a"]}`, `{"id": "a", "type": "verify_answer", "turn": "play", "expected": "x"}`)}, "tasks/play.json", 2, `lists "tools" but no env is deployed before it`},
		{"no verifier", map[string]string{"tasks/play.json": task(deploy, prompt)}, "tasks/play.json", 1, "the task has no verifier step"},
		{"no prompt", map[string]string{"tasks/play.json": task(deploy, grade)}, "tasks/play.json", 1, "the task has no prompt_agent step"},
		// files and folders
		{"bundle.toml", map[string]string{"bundle.toml": "name = \"x\"\n"}, "bundle.toml", 0, "bundle.toml is reserved"},
		{"agents folder", map[string]string{"agents/a/agent.toml": ""}, "agents", 0, "agents/ is not supported"},
		{"no tasks folder", map[string]string{"tasks/play.json": del, "tasks/.hidden.json": del, "evals/train.toml": del}, "tasks", 0, "a bundle needs at least one task"},
		{"no task files", map[string]string{"tasks/play.json": del, "evals/train.toml": del}, "tasks", 0, "no task files"},
		{"stray task file", map[string]string{"tasks/notes.txt": "hi"}, "tasks/notes.txt", 0, "not a task file"},
		{"bad task name", map[string]string{"tasks/my task.json": task(deploy, prompt, grade)}, "tasks/my task.json", 0, `task name "my task"`},
		// seeds
		{"seeds without task", map[string]string{"tasks/x.seeds.jsonl": "{\"id\": \"a\"}\n"}, "tasks/x.seeds.jsonl", 0, "no task file x.json for these seeds"},
		{"seed missing placeholder key", with(seeded, map[string]string{"tasks/lvl.seeds.jsonl": "{\"id\": \"a\", \"level\": 1, \"pat\": \"^1$\"}\n{\"id\": \"b\", \"pat\": \"^2$\"}\n"}), "tasks/lvl.seeds.jsonl", 2, `seed "b" has no value for <level>, used in`},
		{"seed without id", with(seeded, map[string]string{"tasks/lvl.seeds.jsonl": "{\"id\": \"a\", \"level\": 1, \"pat\": \"x\"}\n\n{\"level\": 2, \"pat\": \"x\"}\n"}), "tasks/lvl.seeds.jsonl", 3, `has no "id"`},
		{"seed id not a name", with(seeded, map[string]string{"tasks/lvl.seeds.jsonl": "{\"id\": \"a/b\", \"level\": 1, \"pat\": \"x\"}\n"}), "tasks/lvl.seeds.jsonl", 1, `id "a/b": use letters`},
		{"seed id wrong type", with(seeded, map[string]string{"tasks/lvl.seeds.jsonl": "{\"id\": true, \"level\": 1, \"pat\": \"x\"}\n"}), "tasks/lvl.seeds.jsonl", 1, `"id" must be a string or a number`},
		{"duplicate seed id", with(seeded, map[string]string{"tasks/lvl.seeds.jsonl": "{\"id\": \"a\", \"level\": 1, \"pat\": \"x\"}\n{\"id\": \"a\", \"level\": 2, \"pat\": \"x\"}\n"}), "tasks/lvl.seeds.jsonl", 2, `duplicate seed id "a" (first on line 1)`},
		{"seed invalid JSON", with(seeded, map[string]string{"tasks/lvl.seeds.jsonl": "{\"id\": \"a\", \"level\": 1, \"pat\": \"x\"}\n{\"id\": \"b\", \"level\": 2,}\n"}), "tasks/lvl.seeds.jsonl", 2, "invalid JSON"},
		{"seed not an object", with(seeded, map[string]string{"tasks/lvl.seeds.jsonl": "[1, 2]\n"}), "tasks/lvl.seeds.jsonl", 1, "a seed line must be a JSON object"},
		{"seed two objects", with(seeded, map[string]string{"tasks/lvl.seeds.jsonl": "{\"id\": \"a\", \"level\": 1, \"pat\": \"x\"} {\"id\": \"b\"}\n"}), "tasks/lvl.seeds.jsonl", 1, "unexpected data after the object"},
		{"empty seeds file", with(seeded, map[string]string{"tasks/lvl.seeds.jsonl": "\n\n"}), "tasks/lvl.seeds.jsonl", 0, "no seed lines"},
		{"seed makes invalid regex", with(seeded, map[string]string{"tasks/lvl.seeds.jsonl": "{\"id\": \"a\", \"level\": 1, \"pat\": \"^1$\"}\n{\"id\": \"b\", \"level\": 2, \"pat\": \"[2\"}\n"}), "tasks/lvl.seeds.jsonl", 2, `task lvl/b: step "ans": invalid pattern "[2"`},
		{"seed names missing env", with(seeded, map[string]string{
			"tasks/lvl.json":        task(`{"id": "env", "type": "deploy_env", "env": "<env>"}`, prompt, grade),
			"tasks/lvl.seeds.jsonl": "{\"id\": \"a\", \"env\": \"toy\"}\n{\"id\": \"b\", \"env\": \"toyy\"}\n"}), "tasks/lvl.seeds.jsonl", 2, `task lvl/b: step "env": names env "toyy", which the bundle does not have (envs: toy) (template `},
		{"seed makes duplicate step ids", with(seeded, map[string]string{
			"tasks/lvl.json":        task(deploy, `{"id": "<step>", "type": "prompt_agent", "prompt": "Go."}`, grade),
			"tasks/lvl.seeds.jsonl": "{\"id\": \"a\", \"step\": \"play\"}\n{\"id\": \"b\", \"step\": \"grade\"}\n"}), "tasks/lvl.seeds.jsonl", 2, `task lvl/b: step "grade": duplicate step id`},
		{"template problem in seeded task", with(seeded, map[string]string{"tasks/lvl.json": task(deploy, `{"id": "play", "type": "prompt_agent", "prompt": "<level>", "bogus": 1}`, grade)}), "tasks/lvl.json", 3, `unknown key "bogus"`},
		// evals
		{"eval empty", map[string]string{"evals/train.toml": "tasks = []\n"}, "evals/train.toml", 1, `"tasks" is empty`},
		{"eval without tasks", map[string]string{"evals/train.toml": "# nothing\n"}, "evals/train.toml", 0, `has no "tasks"`},
		{"eval unknown key", map[string]string{"evals/train.toml": "tasks = [\"play\"]\ntype = \"eval\"\n"}, "evals/train.toml", 2, `unknown key "type" (keys: tasks)`},
		{"eval tasks not a list", map[string]string{"evals/train.toml": "tasks = \"play\"\n"}, "evals/train.toml", 1, `"tasks" must be an array of task ids or glob patterns`},
		{"eval names no task", map[string]string{"evals/train.toml": "tasks = [\n  \"play\",\n  \"plya\",\n]\n"}, "evals/train.toml", 3, `"plya" names no task`},
		{"eval names a family", with(seeded, map[string]string{"evals/train.toml": "tasks = [\"lvl\"]\n"}), "evals/train.toml", 1, `"lvl" names no task (lvl is a seeded family: its tasks are lvl/<id>; use "lvl/*")`},
		{"eval glob matches nothing", map[string]string{"evals/train.toml": "tasks = [\"play\", \"day/*\"]\n"}, "evals/train.toml", 1, `pattern "day/*" matches no task`},
		{"eval invalid glob", map[string]string{"evals/train.toml": "tasks = [\"pl[ay\"]\n"}, "evals/train.toml", 1, `invalid pattern "pl[ay"`},
		{"eval named all", map[string]string{"evals/all.toml": "tasks = [\"play\"]\n"}, "evals/all.toml", 0, `an eval cannot be named "all"`},
		{"eval invalid TOML", map[string]string{"evals/train.toml": "tasks = [\"play\"\n"}, "evals/train.toml", 1, "invalid TOML: array is incomplete"},
		{"stray eval file", map[string]string{"evals/train.yaml": "tasks: [play]\n"}, "evals/train.yaml", 0, "not an eval file"},
		// envs
		{"env.toml missing", map[string]string{"envs/toy/env.toml": del, "envs/toy/Dockerfile": "FROM scratch\n"}, "envs/toy/env.toml", 0, "every env needs an env.toml"},
		{"env.toml unknown key", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\"]\nports = 80\n"}, "envs/toy/env.toml", 2, `unknown key "ports" (keys: image, command, build, port, env, cpu, memory_mb, reuse, reset_tool)`},
		{"env.toml unknown table", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\"]\n[docker]\nx = 1\n"}, "envs/toy/env.toml", 2, `unknown key "docker"`},
		{"env.toml no image or command", map[string]string{"envs/toy/env.toml": "port = 8080\n"}, "envs/toy/env.toml", 0, `needs "image" (a Docker image) and/or "command"`},
		{"env.toml port type", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\"]\nport = \"80\"\n"}, "envs/toy/env.toml", 2, `"port" must be a whole number, got a TOML string`},
		{"env.toml port range", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\"]\nport = 70000\n"}, "envs/toy/env.toml", 2, `"port" 70000 is not a port`},
		{"env.toml command string", map[string]string{"envs/toy/env.toml": "command = \"bin/toy --x\"\n"}, "envs/toy/env.toml", 1, `"command" must be an array of strings`},
		{"env.toml empty element", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\", \"\"]\n"}, "envs/toy/env.toml", 1, `"command" has an empty element (#2)`},
		{"env.toml NUL in command", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\", \"a\\u0000b\"]\n"}, "envs/toy/env.toml", 1, `"command" element #2 holds a NUL byte`},
		{"env.toml NUL in build", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\"]\nbuild = [\"make\\u0000\"]\n"}, "envs/toy/env.toml", 2, `"build" element #1 holds a NUL byte`},
		{"env.toml NUL in env value", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\"]\nenv = { LEVEL = \"3\\u0000\" }\n"}, "envs/toy/env.toml", 2, `env var LEVEL holds a NUL byte`},
		{"env.toml env not strings", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\"]\nenv = { LEVEL = 3 }\n"}, "envs/toy/env.toml", 2, `"env" must be a table of strings`},
		{"env.toml reserved var", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\"]\nenv = { AGENTENV_PORT = \"1\" }\n"}, "envs/toy/env.toml", 2, "AGENTENV_PORT is set by the sandbox"},
		{"env.toml cpu", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\"]\ncpu = -1\n"}, "envs/toy/env.toml", 2, `"cpu" must be more than 0`},
		{"env.toml cpu nan", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\"]\ncpu = nan\n"}, "envs/toy/env.toml", 2, `"cpu" must be more than 0`},
		{"env.toml cpu inf", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\"]\ncpu = inf\n"}, "envs/toy/env.toml", 2, `"cpu" must be a finite number`},
		{"env.toml memory", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\"]\nmemory_mb = 0\n"}, "envs/toy/env.toml", 2, `"memory_mb" must be at least 1`},
		{"env.toml reserved reset var", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\"]\nenv = { AGENTENV_RESET_TOOL = \"x\" }\n"}, "envs/toy/env.toml", 2, "AGENTENV_RESET_TOOL is set by agentenv"},
		{"env.toml reuse zero", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\"]\nreuse = 0\n"}, "envs/toy/env.toml", 2, `"reuse" must be between 1 (a fresh env every episode) and 100000, got 0`},
		{"env.toml reuse type", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\"]\nreuse = true\n"}, "envs/toy/env.toml", 2, `"reuse" must be a whole number (episodes per deploy), got a TOML bool`},
		{"env.toml reset_tool without reuse", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\"]\nreset_tool = \"wipe\"\n"}, "envs/toy/env.toml", 2, `"reset_tool" is set but the env is not reused: add reuse = N`},
		{"env.toml reset_tool empty", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\"]\nreuse = 4\nreset_tool = \" \"\n"}, "envs/toy/env.toml", 3, `"reset_tool" is empty`},
		{"tools name the reset tool", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\"]\nreuse = 4\nreset_tool = \"wipe\"\n",
			"tasks/play.json": playJSON(`{"id": "play", "type": "prompt_agent", "prompt": "Go.", "tools": ["wipe"]}`)}, "tasks/play.json", 3, `"tools" names "wipe", the reset tool of env "toy" (its env.toml reuse), which is never offered to the model`},
		{"env.toml invalid TOML", map[string]string{"envs/toy/env.toml": "command = [\"bin/toy\"\n"}, "envs/toy/env.toml", 1, "invalid TOML: array is incomplete"},
		{"env file not folder", map[string]string{"envs/x.toml": "image = \"x\"\n"}, "envs/x.toml", 0, "not an env folder"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeBundle(t, baseBundle, tc.changes)
			b, err := Load(dir, Options{})
			if err == nil {
				t.Fatalf("loaded; want an error about %s", tc.want)
			}
			if b != nil {
				t.Errorf("got a bundle with the error: nothing may be half-loaded")
			}
			var le *LoadError
			if !errors.As(err, &le) {
				t.Fatalf("error %T is not a *LoadError: %v", err, err)
			}
			where := filepath.Join(dir, filepath.FromSlash(tc.file)) + ": "
			if tc.line > 0 {
				where = fmt.Sprintf("%s:%d: ", filepath.Join(dir, filepath.FromSlash(tc.file)), tc.line)
			}
			for _, p := range le.Problems {
				if strings.HasPrefix(p.String(), where) && strings.Contains(p.Msg, tc.want) {
					return
				}
			}
			t.Errorf("no problem %q%s in:\n%v", where, tc.want, err)
		})
	}
}

// Problems are collected, not stopped at the first, and capped.
func TestLoadCollectsAndCapsProblems(t *testing.T) {
	lines := []string{`{"id": "full", "level": 1, "pat": "x"}`}
	for i := 1; i < 50; i++ {
		lines = append(lines, fmt.Sprintf(`{"id": "s%d", "level": 1}`, i)) // no "pat"
	}
	dir := writeBundle(t, baseBundle, map[string]string{
		"tasks/play.json":       playJSON(`{"id": "play", "type": "prompt_agent"}`),
		"envs/toy/env.toml":     "port = 1\n",
		"tasks/lvl.json":        task(deploy, `{"id": "play", "type": "prompt_agent", "prompt": "<pat> <level>"}`, grade),
		"tasks/lvl.seeds.jsonl": strings.Join(lines, "\n") + "\n",
	})
	_, err := Load(dir, Options{MaxErrors: 10})
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("want a *LoadError, got %v", err)
	}
	if len(le.Problems) != 10 || le.More != 41 {
		t.Fatalf("got %d problems + %d more, want 10 + 41 (1 env, 1 task, 49 seeds):\n%v", len(le.Problems), le.More, err)
	}
	if !strings.Contains(err.Error(), "51 problems") || !strings.Contains(err.Error(), "and 41 more") {
		t.Errorf("message does not count the problems:\n%v", err)
	}
	// Sorted by file then line: the env file comes first.
	if !strings.HasSuffix(le.Problems[0].File, filepath.Join("envs", "toy", "env.toml")) {
		t.Errorf("first problem %v, want the env file's", le.Problems[0])
	}
}

// A bundle folder that does not exist is named with the folder beside it
// the user probably meant (serve examples/gridsm gave a raw stat error),
// or the folders there.
func TestLoadMissingFolderSuggests(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"gridsim", "inbox"} {
		if err := os.Mkdir(filepath.Join(dir, f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]string{
		"gridsm":  "gridsm: no such folder; did you mean " + filepath.Join(dir, "gridsim") + "?",
		"another": "another: no such folder (the folders in " + dir + ": gridsim, inbox)",
	} {
		_, err := Load(filepath.Join(dir, name), Options{})
		if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "stat ") {
			t.Errorf("Load(%s) = %v, want %q", name, err, want)
		}
	}
}

func TestLoadNotAFolder(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing"), Options{}); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing folder: got %v, want a not-exist error", err)
	}
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(f, Options{}); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Errorf("file: got %v, want 'not a folder'", err)
	}
}

// reuse as loaded: absent or 1 is one episode per deploy, with no reset
// tool; N >= 2 takes reset_tool or the default.
func TestEnvReuseAsLoaded(t *testing.T) {
	cases := []struct {
		toml      string
		reuse     int
		resetTool string
	}{
		{"command = [\"bin/toy\"]\n", 0, ""},
		{"command = [\"bin/toy\"]\nreuse = 1\n", 1, ""},
		{"command = [\"bin/toy\"]\nreuse = 8\n", 8, DefaultResetTool},
		{"command = [\"bin/toy\"]\nreuse = 8\nreset_tool = \"wipe\"\n", 8, "wipe"},
	}
	for _, c := range cases {
		dir := writeBundle(t, baseBundle, map[string]string{"envs/toy/env.toml": c.toml})
		b, err := Load(dir, Options{})
		if err != nil {
			t.Fatalf("%q: %v", c.toml, err)
		}
		if env := b.Envs["toy"]; env.Reuse != c.reuse || env.ResetTool != c.resetTool {
			t.Errorf("%q: reuse %d, reset tool %q; want %d, %q", c.toml, env.Reuse, env.ResetTool, c.reuse, c.resetTool)
		}
	}
}
