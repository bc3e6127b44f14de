package bundle

import (
	"reflect"
	"testing"
)

// Seeds that change what a turn offers make separate toolsets; seeds that
// do not share one.
func TestToolsetsFromSeeds(t *testing.T) {
	dir := writeBundle(t, baseBundle, map[string]string{
		"envs/big/env.toml": "image = \"big:1\"\n",
		"tasks/lvl.json": task(`{"id": "env", "type": "deploy_env", "env": "<env>"}`,
			`{"id": "setup", "type": "call_tool", "tool": "load"}`,
			`{"id": "play", "type": "prompt_agent", "prompt": "Go <id>.", "tools": ["look", "<tool>"]}`,
			`{"id": "grade", "type": "verify_tool", "tool": "grade"}`),
		"tasks/lvl.seeds.jsonl": `{"id": 1, "env": "toy", "tool": "move"}` + "\n" +
			`{"id": 2, "env": "toy", "tool": "move"}` + "\n" +
			`{"id": 3, "env": "toy", "tool": "jump"}` + "\n" +
			`{"id": 4, "env": "big", "tool": "move"}` + "\n",
	})
	b := mustLoad(t, dir)
	want := map[string]struct {
		envs, hidden []string
		tools        []string
	}{
		"lvl/1": {[]string{"toy"}, []string{"toy/grade", "toy/load"}, []string{"look", "move"}},
		"lvl/2": {[]string{"toy"}, []string{"toy/grade", "toy/load"}, []string{"look", "move"}},
		"lvl/3": {[]string{"toy"}, []string{"toy/grade", "toy/load"}, []string{"look", "jump"}},
		"lvl/4": {[]string{"big"}, []string{"big/grade", "big/load"}, []string{"look", "move"}},
	}
	for id, w := range want {
		task, err := b.Task(id)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := b.Toolset(task.Toolset)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ts.Envs, w.envs) || !reflect.DeepEqual(ts.Hidden, w.hidden) || !reflect.DeepEqual(ts.Turns, [][]string{w.tools}) {
			t.Errorf("%s: toolset %+v, want envs %v hidden %v tools %v", id, ts, w.envs, w.hidden, w.tools)
		}
		if task.Step("setup").Env != w.envs[0] {
			t.Errorf("%s: setup env %q, want the deployed %q", id, task.Step("setup").Env, w.envs[0])
		}
		if got := task.Step("play").Prompt; got != "Go "+id[len("lvl/"):]+"." {
			t.Errorf("%s: prompt %q", id, got)
		}
	}
	l1, _ := b.Task("lvl/1")
	l2, _ := b.Task("lvl/2")
	l3, _ := b.Task("lvl/3")
	if l1.Toolset != l2.Toolset || l1.Toolset == l3.Toolset {
		t.Errorf("toolsets %s %s %s: want 1 = 2 != 3", l1.Toolset, l2.Toolset, l3.Toolset)
	}
	// play (from baseBundle) + three from the family.
	if n := len(b.Toolsets()); n != 4 {
		t.Errorf("%d toolsets, want 4", n)
	}
}
