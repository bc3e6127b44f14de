package episode_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/core/episode"
)

func toolNames(tools []episode.Tool) []string {
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	return names
}

func contents(msgs []episode.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Role+": "+m.Content)
	}
	return out
}

func TestSingleTurn(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	r := newRig(t, dir, rigOptions{})
	tests := []struct {
		name        string
		replies     []string
		wantTools   [][]string // tool messages per reply
		wantReward  float64
		wantMetrics map[string]float64
	}{
		{
			name: "solved with a call, then an answer",
			replies: []string{
				"<think>2 + 3 = 5</think>Adding three.\n" + call("add", map[string]any{"n": 3}) + "<|im_end|>",
				"I reached 5.<|im_end|>",
			},
			wantTools:   [][]string{{"tool: 5"}, nil},
			wantReward:  1,
			wantMetrics: map[string]float64{"score/grade": 1, "tool_calls": 1, "unparsed_calls": 0, "invalid_calls": 0, "turns": 2, "failed": 0},
		},
		{
			name:        "answer without playing",
			replies:     []string{"No idea."},
			wantTools:   [][]string{nil},
			wantReward:  0,
			wantMetrics: map[string]float64{"score/grade": 0, "tool_calls": 0, "turns": 1},
		},
		{
			name: "two calls in one reply, a tool error, then the right guess",
			replies: []string{
				call("add", map[string]any{"n": 1}) + "\n" + call("guess", map[string]any{"value": 4}),
				call("guess", map[string]any{"value": 5}),
				"Done.",
			},
			wantTools:   [][]string{{"tool: 3", "tool: too low"}, {"tool: correct"}, nil},
			wantReward:  1,
			wantMetrics: map[string]float64{"score/grade": 1, "tool_calls": 3, "turns": 3, "tool_errors": 0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ep := r.play(episode.Request{TaskID: "puzzle"})
			obs := r.start(ep)
			if obs.EpisodeID != ep.ID() || obs.TaskID != "puzzle" || obs.Done {
				t.Fatalf("Start observation %+v", obs)
			}
			if got := contents(obs.Messages); !reflect.DeepEqual(got, []string{"system: You play a number puzzle.", "user: Reach the target."}) {
				t.Fatalf("opening messages = %q", got)
			}
			// Hidden: load_puzzle (setup) and grade (verifier).
			wantTools := []string{"add", "crash", "echo", "flood", "guess", "sleep", "write_note"}
			if got := toolNames(obs.Tools); !reflect.DeepEqual(got, wantTools) {
				t.Fatalf("tools = %v, want %v", got, wantTools)
			}
			if !strings.Contains(string(obs.Tools[0].Parameters), `"n"`) {
				t.Fatalf("tool schema %+v", obs.Tools[0])
			}
			for i, reply := range tc.replies {
				obs = r.step(ep, reply)
				if got := contents(obs.Messages); !reflect.DeepEqual(got, tc.wantTools[i]) {
					t.Fatalf("reply %d: messages = %q, want %q", i, got, tc.wantTools[i])
				}
				if obs.Turn != i+1 {
					t.Fatalf("reply %d: turn = %d", i, obs.Turn)
				}
				if last := i == len(tc.replies)-1; obs.Done != last {
					t.Fatalf("reply %d: done = %v", i, obs.Done)
				}
			}
			if obs.Reward == nil || *obs.Reward != tc.wantReward {
				t.Fatalf("reward = %v, want %v", obs.Reward, tc.wantReward)
			}
			for k, v := range tc.wantMetrics {
				if got, ok := obs.Metrics[k]; !ok || got != v {
					t.Errorf("metric %s = %v (present %v), want %v", k, got, ok, v)
				}
			}
			// Done episodes are torn down at once, before Close.
			r.assertNothingLive()
			if _, err := ep.Step(context.Background(), "more"); episode.CodeOf(err) != episode.CodeValidation {
				t.Fatalf("Step after done = %v, want a validation error", err)
			}
			if err := ep.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestInvalidCallsAreAnsweredAndCounted(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	r := newRig(t, dir, rigOptions{})
	ep := r.play(episode.Request{TaskID: "puzzle"})
	r.start(ep)
	reply := strings.Join([]string{
		call("fly", map[string]any{}),
		call("add", map[string]any{"n": "three"}),
		call("add", map[string]any{}),
		call("load_puzzle", map[string]any{"target": 1}), // hidden setup tool
		"<tool_call>\n{\"name\": \"add\", \"arguments\": {\"n\": 3,}}\n</tool_call>",
		call("add", map[string]any{"n": 3}),
	}, "\n")
	obs := r.step(ep, reply)
	msgs := contents(obs.Messages)
	if len(msgs) != 6 {
		t.Fatalf("messages = %q, want 6 answers", msgs)
	}
	// Unparsed calls are answered first, then the calls in order.
	wants := []string{
		"could not be read",
		`no tool "fly"`,
		"invalid arguments for add",
		"invalid arguments for add",
		`no tool "load_puzzle"`,
		"tool: 5",
	}
	for i, w := range wants {
		if !strings.Contains(msgs[i], w) {
			t.Errorf("message %d = %q, want it to mention %q", i, msgs[i], w)
		}
	}
	if !strings.Contains(msgs[2], "/n") || !strings.Contains(msgs[3], "n") {
		t.Errorf("schema errors should say where: %q, %q", msgs[2], msgs[3])
	}
	if !strings.Contains(msgs[1], "add, crash, echo") {
		t.Errorf("unknown-tool answer should list the tools: %q", msgs[1])
	}
	obs = r.step(ep, "Done.")
	want := map[string]float64{"tool_calls": 5, "invalid_calls": 4, "unparsed_calls": 1, "score/grade": 1}
	for k, v := range want {
		if obs.Metrics[k] != v {
			t.Errorf("metric %s = %v, want %v", k, obs.Metrics[k], v)
		}
	}
}

// multiTurnTask: ask for the start value (answered via end_turn), then
// solve; scored by four verifiers of every kind.
const multiTurnTask = `[
  {"id": "env", "type": "deploy_env", "env": "testenv"},
  {"id": "load", "type": "call_tool", "tool": "load_puzzle", "arguments": {"target": 42, "start": 40}},
  {"id": "ask", "type": "prompt_agent", "system_prompt": "Be brief.", "prompt": "What is the start value?", "tools": ["echo"]},
  {"id": "solve", "type": "prompt_agent", "system_prompt": "Now solve it.", "prompt": "Reach 42, then answer with the value."},
  {"id": "start_ok", "type": "verify_answer", "turn": "ask", "expected": "40"},
  {"id": "final", "type": "verify_answer", "turn": "solve", "pattern": "^42$"},
  {"id": "grade", "type": "verify_tool", "tool": "grade"},
  {"id": "file", "type": "verify_command", "command": ["sh", "-c", "test \"$(cat value.txt)\" = 42"]}
]
`

func TestMultiTurnWithEndTurnAndRewardPlugin(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/chat.json": multiTurnTask})
	r := newRig(t, dir, rigOptions{reward: true})
	ep := r.play(episode.Request{Split: "all", Index: new(0)})
	obs := r.start(ep)
	if got := toolNames(obs.Tools); !reflect.DeepEqual(got, []string{"echo", "end_turn"}) {
		t.Fatalf("first turn tools = %v", got)
	}
	if got := contents(obs.Messages); !reflect.DeepEqual(got, []string{"system: Be brief.", "user: What is the start value?"}) {
		t.Fatalf("opening = %q", got)
	}
	// end_turn's result is the next prompt; the new turn's tools come with it.
	obs = r.step(ep, call("end_turn", map[string]any{"answer": "40"})+"\n"+call("echo", map[string]any{"text": "late"}))
	msgs := contents(obs.Messages)
	if len(msgs) != 2 || msgs[0] != "tool: Now solve it.\n\nReach 42, then answer with the value." || !strings.Contains(msgs[1], "not run") {
		t.Fatalf("after end_turn: %q", msgs)
	}
	wantTools := []string{"add", "crash", "echo", "flood", "guess", "sleep", "write_note", "end_turn"}
	if got := toolNames(obs.Tools); !reflect.DeepEqual(got, wantTools) {
		t.Fatalf("second turn tools = %v, want %v", got, wantTools)
	}
	if obs.Done {
		t.Fatal("done after the first turn")
	}
	obs = r.step(ep, call("add", map[string]any{"n": 2}))
	if got := contents(obs.Messages); !reflect.DeepEqual(got, []string{"tool: 42"}) {
		t.Fatalf("add: %q", got)
	}
	obs = r.step(ep, call("end_turn", map[string]any{"answer": "42"}))
	if !obs.Done || contents(obs.Messages)[0] != "tool: The episode is over." {
		t.Fatalf("final step: %+v", obs)
	}
	scores := map[string]float64{"score/start_ok": 1, "score/final": 1, "score/grade": 1, "score/file": 1}
	for k, v := range scores {
		if obs.Metrics[k] != v {
			t.Errorf("%s = %v, want %v", k, obs.Metrics[k], v)
		}
	}
	// echo after end_turn did not run and does not count.
	if *obs.Reward != 1 || obs.Metrics["turns"] != 3 || obs.Metrics["tool_calls"] != 1 {
		t.Fatalf("reward %v metrics %v", *obs.Reward, obs.Metrics)
	}

	// A worse play: the mean of the four scores through the reward plugin.
	ep = r.play(episode.Request{TaskID: "chat"})
	r.start(ep)
	// A reply without a call ends the turn (its text is the answer) and the
	// turns after it: the second question is never asked.
	obs = r.step(ep, "<think>It said 40.</think>\n40\n<|im_end|>")
	if !obs.Done || *obs.Reward != 0.25 || obs.Metrics["score/start_ok"] != 1 || obs.Metrics["score/final"] != 0 || obs.Metrics["turns"] != 1 {
		t.Fatalf("reward %v metrics %v, want done after one reply, 0.25 with only start_ok", *obs.Reward, obs.Metrics)
	}
	if len(obs.Messages) != 0 {
		t.Fatalf("the next prompt was sent after a reply without end_turn: %+v", obs.Messages)
	}
}

func TestRewardStepPicksOneScore(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/chat.json": multiTurnTask})
	r := newRig(t, dir, rigOptions{rewardStep: "start_ok"})
	ep := r.play(episode.Request{TaskID: "chat"})
	r.start(ep)
	obs := r.step(ep, "40")
	if !obs.Done || *obs.Reward != 1 || obs.Metrics["score/grade"] != 0 {
		t.Fatalf("reward %v metrics %v", *obs.Reward, obs.Metrics)
	}
}

func TestSeededFamily(t *testing.T) {
	task := `[
  {"id": "env", "type": "deploy_env", "env": "testenv"},
  {"id": "load", "type": "call_tool", "tool": "load_puzzle", "arguments": {"target": "<target>", "start": "<start>"}},
  {"id": "play", "type": "prompt_agent", "prompt": "Go from <start> to <target>."},
  {"id": "grade", "type": "verify_tool", "tool": "grade"}
]`
	seeds := `{"id": "a", "target": 3, "start": 1}
{"id": "b", "target": 10, "start": 4}
{"id": "c", "target": -2, "start": 0}
`
	dir := bundleFiles(t, nil, map[string]string{
		"tasks/walk.json": task, "tasks/walk.seeds.jsonl": seeds,
		"evals/hard.toml": "tasks = [\"walk/b\", \"walk/c\"]\n",
	})
	r := newRig(t, dir, rigOptions{})
	tests := []struct {
		split  string
		index  int
		id     string
		prompt string
		add    int
	}{
		{"all", 0, "walk/a", "Go from 1 to 3.", 2},
		{"all", 1, "walk/b", "Go from 4 to 10.", 6},
		{"hard", 1, "walk/c", "Go from 0 to -2.", -2},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			ep := r.play(episode.Request{Split: tc.split, Index: new(tc.index)})
			obs := r.start(ep)
			if obs.TaskID != tc.id || contents(obs.Messages)[0] != "user: "+tc.prompt {
				t.Fatalf("task %s, messages %q", obs.TaskID, contents(obs.Messages))
			}
			r.step(ep, call("add", map[string]any{"n": tc.add}))
			obs = r.step(ep, "there")
			if *obs.Reward != 1 {
				t.Fatalf("reward %v: the seed values did not reach the env", *obs.Reward)
			}
		})
	}
}

func TestMaxTurns(t *testing.T) {
	capped := `[
  {"id": "env", "type": "deploy_env", "env": "testenv"},
  {"id": "load", "type": "call_tool", "tool": "load_puzzle", "arguments": {"target": 3}},
  {"id": "one", "type": "prompt_agent", "prompt": "First.", "max_turns": 2},
  {"id": "two", "type": "prompt_agent", "prompt": "Second."},
  {"id": "grade", "type": "verify_tool", "tool": "grade"}
]`
	dir := bundleFiles(t, nil, map[string]string{"tasks/capped.json": capped})
	r := newRig(t, dir, rigOptions{})
	add := call("add", map[string]any{"n": 1})

	t.Run("a turn's max_turns ends the turn", func(t *testing.T) {
		ep := r.play(episode.Request{TaskID: "capped"})
		r.start(ep)
		r.step(ep, add)
		obs := r.step(ep, add) // second reply of turn one: the turn ends, turn two opens
		if obs.Done || len(obs.Messages) != 2 || obs.Messages[1].Content != "Second." || obs.Messages[1].Role != "user" {
			t.Fatalf("after the cap: %+v", obs)
		}
		r.step(ep, add)
		obs = r.step(ep, "ok")
		if !obs.Done || *obs.Reward != 1 || obs.Turn != 4 {
			t.Fatalf("final: %+v", obs)
		}
	})
	t.Run("the request's max_turns ends the episode", func(t *testing.T) {
		ep := r.play(episode.Request{TaskID: "capped", MaxTurns: 1})
		r.start(ep)
		obs := r.step(ep, add)
		if !obs.Done || obs.Metrics["turns"] != 1 || *obs.Reward != 0 {
			t.Fatalf("capped episode: %+v", obs)
		}
		if got := contents(obs.Messages); !reflect.DeepEqual(got, []string{"tool: 1"}) {
			t.Fatalf("the last reply's calls still run: %q", got)
		}
	})
	t.Run("the server's max_turns caps every episode; a reset may lower it", func(t *testing.T) {
		r := newRig(t, dir, rigOptions{tune: func(c *episode.Config) { c.Limits.MaxTurns = 3 }})
		for _, tc := range []struct{ asked, want int }{{0, 3}, {9, 3}, {2, 2}} {
			ep := r.play(episode.Request{TaskID: "capped", MaxTurns: tc.asked})
			r.start(ep)
			var obs episode.Observation
			for n := 1; n <= tc.want; n++ {
				if obs = r.step(ep, add); obs.Done != (n == tc.want) {
					t.Fatalf("reset max_turns %d, reply %d: done %v, want the episode to end at reply %d", tc.asked, n, obs.Done, tc.want)
				}
			}
			if obs.Metrics["turns"] != float64(tc.want) {
				t.Fatalf("reset max_turns %d: %v turns", tc.asked, obs.Metrics["turns"])
			}
		}
	})
}

func TestToolsCachedPerToolset(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{
		"tasks/puzzle.json": puzzleTask(5, 2),
		"tasks/other.json":  puzzleTask(7, 0), // same toolset
		"tasks/chat.json":   multiTurnTask,
	})
	r := newRig(t, dir, rigOptions{reward: true})
	sets := r.bundle.Toolsets()
	if len(sets) != 2 {
		t.Fatalf("%d toolsets, want 2", len(sets))
	}
	want := map[string][]string{
		"chat":   {"echo", "add", "crash", "flood", "guess", "sleep", "write_note", "end_turn"},
		"puzzle": {"add", "crash", "echo", "flood", "guess", "sleep", "write_note"},
		"other":  {"add", "crash", "echo", "flood", "guess", "sleep", "write_note"},
	}
	for _, ts := range sets {
		for round := range 2 {
			tools, err := r.engine.Tools(context.Background(), ts.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := toolNames(tools); !reflect.DeepEqual(got, want[ts.Task.ID]) {
				t.Fatalf("toolset %s (round %d) = %v, want %v", ts.ID, round, got, want[ts.Task.ID])
			}
		}
	}
	if n := r.driver.deploys.Load(); n != 2 {
		t.Fatalf("%d deploys for 2 toolsets asked twice each, want 2", n)
	}
	if _, err := r.engine.Tools(context.Background(), "ts-nope"); episode.CodeOf(err) != episode.CodeNotFound {
		t.Fatalf("unknown toolset: %v", err)
	}
}

func TestBuildRunsOncePerEngine(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	env := "command = [\"bin/testenv\"]\n" +
		"build = [\"sh\", \"-c\", \"echo built >> builds.log && mkdir -p bin && cp \\\"$SRC\\\" bin/testenv\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "envs/testenv/env.toml"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SRC", testenvBin)
	r := newRig(t, dir, rigOptions{})
	for range 2 {
		ep := r.play(episode.Request{TaskID: "puzzle"})
		r.start(ep)
		r.step(ep, "done")
	}
	log, err := os.ReadFile(filepath.Join(dir, "envs/testenv/builds.log"))
	if err != nil || strings.Count(string(log), "built") != 1 {
		t.Fatalf("builds.log = %q (%v), want one build", log, err)
	}
}

func TestPlayValidation(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	r := newRig(t, dir, rigOptions{})
	tests := []struct {
		name string
		req  episode.Request
		code episode.Code
		want string
	}{
		{"nothing", episode.Request{}, episode.CodeValidation, "no task"},
		{"both", episode.Request{TaskID: "puzzle", Split: "all", Index: new(0)}, episode.CodeValidation, "not both"},
		{"no index", episode.Request{Split: "all"}, episode.CodeValidation, "without an index"},
		{"negative index", episode.Request{Split: "all", Index: new(-1)}, episode.CodeValidation, "index -1"},
		{"index past the end", episode.Request{Split: "all", Index: new(1)}, episode.CodeNotFound, "out of range"},
		{"unknown split", episode.Request{Split: "nope", Index: new(0)}, episode.CodeNotFound, `no split "nope"`},
		{"unknown task", episode.Request{TaskID: "nope"}, episode.CodeNotFound, `no task "nope"`},
		{"unknown format", episode.Request{TaskID: "puzzle", ToolFormat: "xml"}, episode.CodeValidation, `tool_format "xml"`},
		{"negative max_turns", episode.Request{TaskID: "puzzle", MaxTurns: -1}, episode.CodeValidation, "max_turns -1"},
		{"bad episode id", episode.Request{TaskID: "puzzle", EpisodeID: "a b"}, episode.CodeValidation, "episode_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.engine.Play(tc.req)
			if episode.CodeOf(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Play = %v, want %s mentioning %q", err, tc.code, tc.want)
			}
		})
	}
	ep := r.play(episode.Request{TaskID: "puzzle", EpisodeID: "my-episode.1"})
	if ep.ID() != "my-episode.1" {
		t.Fatalf("ID = %s", ep.ID())
	}
	if _, err := ep.Step(context.Background(), "hi"); episode.CodeOf(err) != episode.CodeValidation {
		t.Fatalf("Step before Start = %v", err)
	}
	if err := ep.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r.driver.deploys.Load() != 0 {
		t.Fatal("Play alone deployed something")
	}
}

func TestNewEngineRefusesUnrewardableBundle(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/chat.json": multiTurnTask})
	defer func() {
		if r := recover(); r != nil {
			t.Fatal(r)
		}
	}()
	b := mustLoad(t, dir)
	_, err := episode.NewEngine(episode.Config{Bundle: b, Sandbox: nopDriver{}, ToolFormat: toolFormats(t)})
	if err == nil || !strings.Contains(err.Error(), "chat") || !strings.Contains(err.Error(), "reward") {
		t.Fatalf("NewEngine = %v, want a refusal naming the task", err)
	}
	_, err = episode.NewEngine(episode.Config{Bundle: b, Sandbox: nopDriver{}, ToolFormat: toolFormats(t), RewardStep: "nope"})
	if err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("NewEngine with a missing score step = %v", err)
	}
}

func TestScoresAreFinite(t *testing.T) {
	for _, text := range []string{"NaN", "+Inf", "1e999"} {
		t.Run(text, func(t *testing.T) {
			dir := bundleFiles(t, map[string]string{"TESTENV_GRADE_TEXT": text}, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
			r := newRig(t, dir, rigOptions{})
			ep := r.play(episode.Request{TaskID: "puzzle"})
			r.start(ep)
			obs, err := ep.Step(context.Background(), "done")
			if episode.CodeOf(err) != episode.CodeUnscored || (obs.Reward != nil && math.IsNaN(*obs.Reward)) {
				t.Fatalf("grade %q: %v, %+v", text, err, obs)
			}
		})
	}
}

func TestTwoEnvsInOneTask(t *testing.T) {
	task := `[
  {"id": "a", "type": "deploy_env", "env": "testenv"},
  {"id": "b", "type": "deploy_env", "env": "other"},
  {"id": "load_a", "type": "call_tool", "env": "testenv", "tool": "load_puzzle", "arguments": {"target": 2}},
  {"id": "load_b", "type": "call_tool", "env": "other", "tool": "b_load_puzzle", "arguments": {"target": 5}},
  {"id": "play", "type": "prompt_agent", "prompt": "Solve both."},
  {"id": "grade_a", "type": "verify_tool", "env": "testenv", "tool": "grade"},
  {"id": "grade_b", "type": "verify_tool", "env": "other", "tool": "b_grade"},
  {"id": "notes", "type": "verify_command", "env": "other", "command": ["cat", "note.txt"]}
]`
	dir := bundleFiles(t, nil, map[string]string{
		"tasks/both.json":     task,
		"envs/other/env.toml": fmt.Sprintf("command = [%q]\nenv = { TESTENV_PREFIX = \"b_\" }\n", testenvBin),
	})
	r := newRig(t, dir, rigOptions{reward: true})
	ep := r.play(episode.Request{TaskID: "both"})
	obs := r.start(ep)
	names := toolNames(obs.Tools)
	if len(names) != 14 || names[0] != "add" || names[7] != "b_add" {
		t.Fatalf("tools of two envs = %v", names)
	}
	// Each call goes to the env that serves the tool.
	obs = r.step(ep, call("add", map[string]any{"n": 2})+call("b_add", map[string]any{"n": 4})+call("b_write_note", map[string]any{"text": "0.5"}))
	if got := contents(obs.Messages); !reflect.DeepEqual(got, []string{"tool: 2", "tool: 4", "tool: written"}) {
		t.Fatalf("routed calls: %q", got)
	}
	obs = r.step(ep, "done")
	want := map[string]float64{"score/grade_a": 1, "score/grade_b": 0, "score/notes": 0.5}
	for k, v := range want {
		if obs.Metrics[k] != v {
			t.Errorf("%s = %v, want %v", k, obs.Metrics[k], v)
		}
	}
	if *obs.Reward != 0.5 {
		t.Fatalf("reward = %v, want the mean 0.5", *obs.Reward)
	}
	if r.driver.deploys.Load() != 2 {
		t.Fatalf("%d deploys, want 2", r.driver.deploys.Load())
	}
}
