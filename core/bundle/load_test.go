package bundle

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func mustLoad(t *testing.T, dir string) *Bundle {
	t.Helper()
	b, err := Load(dir, Options{})
	if err != nil {
		t.Fatalf("Load(%s): %v", dir, err)
	}
	return b
}

func taskIDs(ts []*Task) []string {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids
}

func TestLoadValidBundles(t *testing.T) {
	cases := []struct {
		dir, desc string
		tasks     []string
		splits    map[string][]string
		toolsets  int
	}{
		{"singleturn", "One turn: set the board up, let the model play, grade it with a tool.", []string{"play"}, nil, 1},
		{"multiturn", "Two turns: the model answers each with end_turn; the second answer is checked.", []string{"chat"}, nil, 1},
		{"verifiers", "One task scored three ways: a grading tool, the answer and a command; combine them with a reward plugin.", []string{"scored"}, nil, 1},
		{"seeded", "A family of tasks filled from seeds: one task per line of tasks/level.seeds.jsonl.", []string{"level/l1", "level/l2", "level/l3"}, nil, 1},
		{"full", "Every kind of task, and two evals.",
			[]string{"chat", "level/l1", "level/l2", "level/l3", "play", "quiz", "scored"},
			map[string][]string{
				"test":  {"chat", "scored", "level/l3"},
				"train": {"level/l1", "level/l2", "level/l3", "play"},
			}, 4},
	}
	for _, tc := range cases {
		t.Run(tc.dir, func(t *testing.T) {
			b := mustLoad(t, "testdata/"+tc.dir)
			if b.Name != tc.dir || b.Description != tc.desc {
				t.Errorf("name, description = %q, %q; want %q, %q", b.Name, b.Description, tc.dir, tc.desc)
			}
			if len(b.Warnings) != 0 {
				t.Errorf("warnings: %v", b.Warnings)
			}
			if got := taskIDs(b.Tasks); !reflect.DeepEqual(got, tc.tasks) {
				t.Errorf("tasks %v, want %v", got, tc.tasks)
			}
			names := []string{SplitAll}
			for n := range tc.splits {
				names = append(names, n)
			}
			if len(b.Splits) != len(names) || b.Splits[0].Name != SplitAll {
				t.Fatalf("splits %v, want all + %v", b.splitNames(), names[1:])
			}
			for i := 1; i < len(b.Splits); i++ {
				if b.Splits[i-1].Name > b.Splits[i].Name && i > 1 {
					t.Errorf("eval splits not sorted: %v", b.splitNames())
				}
			}
			for name, want := range tc.splits {
				s, err := b.Split(name)
				if err != nil {
					t.Fatal(err)
				}
				if got := taskIDs(s.Tasks); !reflect.DeepEqual(got, want) {
					t.Errorf("split %s: %v, want %v", name, got, want)
				}
			}
			if got := len(b.Toolsets()); got != tc.toolsets {
				t.Errorf("%d toolsets, want %d", got, tc.toolsets)
			}
			n := 0
			for _, ts := range b.Toolsets() {
				n += ts.Count
				if ts.Task == nil || ts.Task.Toolset != ts.ID {
					t.Errorf("toolset %s: representative task %v does not have it", ts.ID, ts.Task)
				}
			}
			if n != len(b.Tasks) {
				t.Errorf("toolset counts add up to %d, want %d", n, len(b.Tasks))
			}
		})
	}
}

func TestLookups(t *testing.T) {
	b := mustLoad(t, "testdata/full")
	cases := []struct {
		split string
		index int
		want  string
		err   string
	}{
		{"all", 0, "chat", ""},
		{"all", 6, "scored", ""},
		{"train", 3, "play", ""},
		{"test", 2, "level/l3", ""},
		{"all", 7, "", "index 7 out of range for split \"all\" (7 tasks)"},
		{"all", -1, "", "index -1 out of range"},
		{"nope", 0, "", "no split \"nope\" (splits: all, test, train)"},
	}
	for _, tc := range cases {
		task, err := b.TaskAt(tc.split, tc.index)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("TaskAt(%s, %d): err %v, want %q", tc.split, tc.index, err, tc.err)
			}
		case err != nil:
			t.Errorf("TaskAt(%s, %d): %v", tc.split, tc.index, err)
		case task.ID != tc.want:
			t.Errorf("TaskAt(%s, %d) = %s, want %s", tc.split, tc.index, task.ID, tc.want)
		}
	}
	if task, err := b.Task("level/l2"); err != nil || task.Seed["target"] != json.Number("20") {
		t.Errorf("Task(level/l2) = %v, %v", task, err)
	}
	if _, err := b.Task("level"); err == nil {
		t.Error("Task(level): a family name is not a task")
	}
	ts := b.Toolsets()[0]
	if got, err := b.Toolset(ts.ID); err != nil || got.ID != ts.ID {
		t.Errorf("Toolset(%s) = %v, %v", ts.ID, got, err)
	}
	if _, err := b.Toolset("ts-nope"); err == nil {
		t.Error("Toolset(ts-nope): no error")
	}
}

func TestStepsAsLoaded(t *testing.T) {
	b := mustLoad(t, "testdata/full")
	chat, _ := b.Task("chat")
	if !chat.MultiTurn() {
		t.Error("chat: two prompt_agent steps but not multi-turn")
	}
	final := chat.Step("final")
	if final == nil || final.Regexp == nil || !final.Regexp.MatchString(" 42\n") || final.Line != 5 {
		t.Errorf("chat/final: %+v", final)
	}
	if s := chat.Step("solve"); s.MaxTurns != 8 || s.Tools != nil {
		t.Errorf("chat/solve: max_turns %d tools %v, want 8 and nil (default)", s.MaxTurns, s.Tools)
	}
	play, _ := b.Task("play")
	if s := play.Step("grade"); s.Env != "toy" || string(s.Arguments) != "{}" {
		t.Errorf("play/grade: env %q arguments %s; want the only env and {}", s.Env, s.Arguments)
	}
	scored, _ := b.Task("scored")
	if v := scored.Verifiers(); len(v) != 3 || v[2].Env != "toy" || !reflect.DeepEqual(v[2].Command, []string{"sh", "-c", "echo 1"}) {
		t.Errorf("scored verifiers: %+v", v)
	}
	env := b.Envs["toy"]
	want := &Env{Name: "toy", Dir: env.Dir, File: env.File, Command: []string{"bin/toyenv"},
		Build: []string{"go", "build", "-o", "bin/toyenv", "."}, Port: 18765,
		EnvVars: map[string]string{"TOY_LEVEL": "easy"}, CPU: 1, MemoryMB: 256}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("env toy = %+v, want %+v", env, want)
	}

	// Toolsets: same envs, default tools and hidden tools share one.
	if play.Toolset != scored.Toolset {
		t.Errorf("play and scored offer the same tools but have toolsets %s, %s", play.Toolset, scored.Toolset)
	}
	ts, _ := b.Toolset(chat.Toolset)
	if !ts.EndTurn || !reflect.DeepEqual(ts.Turns, [][]string{{"look"}, nil}) || len(ts.Hidden) != 0 {
		t.Errorf("chat toolset %+v", ts)
	}
	ts, _ = b.Toolset(play.Toolset)
	if ts.EndTurn || !reflect.DeepEqual(ts.Hidden, []string{"toy/grade", "toy/setup"}) || ts.Task != play {
		t.Errorf("play toolset %+v", ts)
	}
	// Ids depend only on content: a second load gives the same ones.
	b2 := mustLoad(t, "testdata/full")
	for i, ts := range b.Toolsets() {
		if b2.Toolsets()[i].ID != ts.ID {
			t.Errorf("toolset ids differ between loads: %s, %s", ts.ID, b2.Toolsets()[i].ID)
		}
	}
}

func TestSeedSubstitution(t *testing.T) {
	b := mustLoad(t, "testdata/seeded")
	cases := []struct {
		id, args, prompt, expected string
	}{
		{"level/l1", `{"level":1,"note":"level 1 of warm-up"}`, "Level 1: reach 10.", "10"},
		{"level/l3", `{"level":3,"note":"level 3 of hard"}`, "Level 3: reach 30.", "30"},
	}
	for _, tc := range cases {
		task, err := b.Task(tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(task.Step("setup").Arguments); got != tc.args {
			t.Errorf("%s arguments %s, want %s", tc.id, got, tc.args)
		}
		play := task.Step("play")
		if play.Prompt != tc.prompt {
			t.Errorf("%s prompt %q, want %q", tc.id, play.Prompt, tc.prompt)
		}
		// <tool_call> is no seed key: it stays as written.
		if play.SystemPrompt != "Reply with <tool_call>{...}</tool_call> blocks." {
			t.Errorf("%s system prompt %q", tc.id, play.SystemPrompt)
		}
		if got := task.Step("answer").Expected; got != tc.expected {
			t.Errorf("%s expected %q, want %q", tc.id, got, tc.expected)
		}
		if task.Family != "level" || task.SeedsFile == "" || task.Seed["id"] == nil {
			t.Errorf("%s: family %q seeds %q seed %v", tc.id, task.Family, task.SeedsFile, task.Seed)
		}
	}
	l3, _ := b.Task("level/l3")
	if l3.Line != 4 {
		t.Errorf("level/l3 line %d, want 4 (a blank line is skipped but counted)", l3.Line)
	}
}

func TestPlaceholders(t *testing.T) {
	keys := map[string]bool{"a": true, "n": true, "obj": true, "s": true, "id": true}
	seed := map[string]any{"a": "x", "n": json.Number("7"), "obj": map[string]any{"k": []any{true, nil}},
		"s": `q"<b>`, "id": "i1"}
	cases := []struct {
		in, text, json string
	}{
		{"plain", "plain", `"plain"`},
		{"<a>", "x", `"x"`},
		{"<n>", "7", `7`},
		{"<obj>", `{"k":[true,null]}`, `{"k":[true,null]}`},
		{"<s>", `q"<b>`, `"q\"<b>"`},
		{"n=<n>, a=<a>!", "n=7, a=x!", `"n=7, a=x!"`},
		{"<tool_call><a></tool_call>", "<tool_call>x</tool_call>", `"<tool_call>x</tool_call>"`},
		{"<<a>>", "<x>", `"<x>"`},
		{"a < b <a>", "a < b x", `"a < b x"`},
		{"<a", "<a", `"<a"`},
		{"<unknown> <id>", "<unknown> i1", `"<unknown> i1"`},
		{"<>", "<>", `"<>"`},
	}
	for _, tc := range cases {
		used := map[string]bool{}
		ts := compileStr(tc.in, keys, used)
		if got := ts.render(seed); got != tc.text {
			t.Errorf("%q as text = %q, want %q", tc.in, got, tc.text)
		}
		root, err := parseJSON([]byte(`{"v": ` + string(appendJSONString(nil, tc.in)) + `}`))
		if err != nil {
			t.Fatal(err)
		}
		args := compileArgs(root, keys, used)
		if got, want := string(args.render(seed)), `{"v":`+tc.json+`}`; got != want {
			t.Errorf("%q in arguments = %s, want %s", tc.in, got, want)
		}
		if !json.Valid(args.render(seed)) {
			t.Errorf("%q: arguments not valid JSON", tc.in)
		}
	}
}

func TestReadmeDescription(t *testing.T) {
	cases := []struct{ readme, want string }{
		{"# Title\n\nThe text.\nMore.\n", "The text."},
		{"---\ntitle: x\n---\n\n<p align=center><img src=x></p>\n[![b](x)](y)\n<!-- a\ncomment -->\nReal text\n", "Real text"},
		{"Title\n=====\n\nBody line\n", "Title"},
		{"# Only a heading\n", "Only a heading"},
		{"```\ncode\n```\nAfter code\n", "After code"},
		{"", ""},
	}
	for _, tc := range cases {
		dir := writeBundle(t, baseBundle, map[string]string{"README.md": tc.readme})
		b := mustLoad(t, dir)
		if b.Description != tc.want {
			t.Errorf("README %q: description %q, want %q", tc.readme, b.Description, tc.want)
		}
	}
	dir := writeBundle(t, baseBundle, map[string]string{"README.md": del})
	b := mustLoad(t, dir)
	if b.Description != "" || len(b.Warnings) != 1 || !strings.Contains(b.Warnings[0], "no README.md") {
		t.Errorf("no README: description %q warnings %v", b.Description, b.Warnings)
	}
}

func TestEnvUsedByNoTaskWarns(t *testing.T) {
	dir := writeBundle(t, baseBundle, map[string]string{"envs/spare/env.toml": "image = \"spare:1\"\n"})
	b := mustLoad(t, dir)
	if len(b.Warnings) != 1 || b.Warnings[0] != "env spare: no task deploys it" {
		t.Errorf("warnings %v", b.Warnings)
	}
	if e := b.Envs["spare"]; e.Image != "spare:1" || e.Port != DefaultPort || e.Command != nil {
		t.Errorf("env spare %+v", e)
	}
}

func TestCheckReward(t *testing.T) {
	full := mustLoad(t, "testdata/full")
	single := mustLoad(t, "testdata/singleturn")
	cases := []struct {
		b    *Bundle
		spec string
		err  string
	}{
		{single, "", ""},
		{full, "", "task scored has several verifier steps and no reward is given"},
		{full, "mean", ""},
		{full, "score:grade", "5 tasks (chat, level/l1, level/l2, level/l3, quiz) have no verifier step \"grade\""},
		{full, "score:setup", "7 tasks (chat, level/l1, level/l2, level/l3, play, and 2 more) have no verifier step \"setup\""},
		{single, "score:grade", ""},
		{single, "score:", "no step id"},
	}
	for _, tc := range cases {
		err := tc.b.CheckReward(tc.spec)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s, %q: %v", tc.b.Name, tc.spec, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s, %q: err %v, want %q", tc.b.Name, tc.spec, err, tc.err)
		}
	}
}
