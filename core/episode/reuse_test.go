package episode_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/episode"
)

// reuseLog is an observer that keeps the engine's reuse events.
type reuseLog struct {
	mu     sync.Mutex
	events []episode.ReuseEvent
}

func (l *reuseLog) ObserveSpan(episode.Span)    {}
func (l *reuseLog) EpisodeEnded(episode.Result) {}
func (l *reuseLog) ObserveReuse(ev episode.ReuseEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
}

// count is how many events of kind env had (depth: only those at it; 0 any).
func (l *reuseLog) count(kind episode.ReuseKind, env string, depth int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, ev := range l.events {
		if ev.Kind == kind && ev.Env == env && (depth == 0 || ev.Depth == depth) {
			n++
		}
	}
	return n
}

// reuseRig is a rig whose engine reports reuse to the returned log.
func reuseRig(t *testing.T, dir string) (*rig, *reuseLog) {
	log := &reuseLog{}
	r := newRig(t, dir, rigOptions{tune: func(c *episode.Config) { c.Observer = log }})
	r.closeFirst()
	return r, log
}

// testenvToml is an env.toml running the test env with extra lines and vars.
func testenvToml(extra string, vars map[string]string) string {
	s := fmt.Sprintf("command = [%q]\n%s", testenvBin, extra)
	var kv []string
	for k, v := range vars {
		kv = append(kv, fmt.Sprintf("%s = %q", k, v))
	}
	if len(kv) > 0 {
		slices.Sort(kv)
		s += "env = { " + strings.Join(kv, ", ") + " }\n"
	}
	return s
}

// cleanTask plays with no setup, adds 1 and checks no file of an earlier
// episode is in the env's folder (its score: 1 when none is).
const cleanTask = `[
  {"id": "env", "type": "deploy_env", "env": "testenv"},
  {"id": "play", "type": "prompt_agent", "prompt": "Add one."},
  {"id": "clean", "type": "verify_command", "command": ["sh", "-c", "test ! -e value.txt && test ! -e note.txt"]}
]`

// playPuzzle plays the puzzle task to its end: add to the target, leave a
// note, stop (after calling before, if any). It returns the final
// observation.
func (r *rig) playPuzzle(add int, before ...func()) episode.Observation {
	r.t.Helper()
	ep := r.play(episode.Request{TaskID: "puzzle"})
	obs := r.start(ep)
	for _, tool := range obs.Tools {
		if tool.Name == bundle.DefaultResetTool {
			r.t.Fatalf("the model was offered the reset tool: %v", obs.Tools)
		}
	}
	r.step(ep, call("add", map[string]int{"n": add})+call("write_note", map[string]string{"text": "seen"}))
	for _, f := range before {
		f()
	}
	obs = r.step(ep, "done")
	if !obs.Done || *obs.Reward != 1 {
		r.t.Fatalf("puzzle: want reward 1, got %+v", obs)
	}
	return obs
}

// An env with reuse = 3 serves three episodes per deploy, reset between
// them: the next episode sees none of the last one's state (the puzzle
// unloaded, its files gone), the model is never offered the reset tool,
// and the fourth episode gets a fresh deploy.
func TestReuseResetsBetweenEpisodes(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{
		"envs/testenv/env.toml": testenvToml("reuse = 3\n", nil),
		"tasks/puzzle.json":     puzzleTask(5, 2),
		"tasks/clean.json":      cleanTask,
	})
	r, log := reuseRig(t, dir)
	r.playPuzzle(3)

	// The second episode on the same env: nothing of the first is left.
	ep := r.play(episode.Request{TaskID: "clean"})
	r.start(ep)
	obs := r.step(ep, call("add", map[string]int{"n": 1}))
	if len(obs.Messages) != 1 || !strings.Contains(obs.Messages[0].Content, "no puzzle loaded") {
		t.Fatalf("add after a reset: want the env to have no puzzle, got %+v", obs.Messages)
	}
	obs = r.step(ep, "done")
	if !obs.Done || obs.Metrics["score/clean"] != 1 {
		t.Fatalf("a file of the first episode crossed the reset: %+v", obs)
	}
	if n := r.driver.deploys.Load(); n != 1 {
		t.Fatalf("two episodes on an env with reuse = 3: %d deploys, want 1", n)
	}

	r.playPuzzle(3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.engine.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	if n := log.count(episode.ReuseRetired, "testenv", 3); n != 1 {
		t.Fatalf("after its third episode the env must be torn down, having served 3: %d such teardowns (events %+v)", n, log.events)
	}
	r.playPuzzle(3)
	if n := r.driver.deploys.Load(); n != 2 {
		t.Fatalf("four episodes at reuse = 3: %d deploys, want 2", n)
	}
	if err := r.engine.Idle(ctx); err != nil { // the last reset runs after the final observation
		t.Fatal(err)
	}
	if got := log.count(episode.ReuseTaken, "testenv", 0); got != 2 {
		t.Errorf("episodes given a reset env: %d, want 2", got)
	}
	if got := log.count(episode.ReuseReset, "testenv", 0); got != 3 {
		t.Errorf("resets: %d, want 3 (after episodes 1, 2 and 4)", got)
	}
}

// A reset that answers with an error, never answers, or kills the env
// never hands the env out: it is torn down and the next episode gets a
// fresh deploy. The first reset passes, so the env that fails has been
// reused once.
func TestFailedResetNeverHandsOutTheEnv(t *testing.T) {
	for _, mode := range []string{"error", "hang", "crash"} {
		t.Run(mode, func(t *testing.T) {
			knob := filepath.Join(t.TempDir(), "reset-fail")
			dir := bundleFiles(t, nil, map[string]string{
				"envs/testenv/env.toml": testenvToml("reuse = 10\nreset_tool = \"wipe\"\n", map[string]string{"TESTENV_RESET_FAIL_FILE": knob}),
				"tasks/puzzle.json":     puzzleTask(5, 2),
			})
			r, log := reuseRig(t, dir)
			r.playPuzzle(3)
			first := r.liveIDs()
			// On the reset env; the reset after it fails (the knob is set
			// before its end, which starts the reset).
			r.playPuzzle(3, func() {
				if err := os.WriteFile(knob, []byte(mode), 0o644); err != nil {
					t.Fatal(err)
				}
			})
			if n := r.driver.deploys.Load(); n != 1 || len(first) != 1 {
				t.Fatalf("second episode: %d deploys, sandboxes %v; want the first env reused", n, first)
			}
			r.playPuzzle(3)
			if n := r.driver.deploys.Load(); n != 2 {
				t.Fatalf("after a failed reset: %d deploys, want 2 (a fresh env)", n)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := r.engine.Idle(ctx); err != nil {
				t.Fatal(err)
			}
			if ids := r.liveIDs(); slices.Contains(ids, first[0]) {
				t.Fatalf("the env whose reset failed (%s) is still live: %v", first[0], ids)
			}
			if n := log.count(episode.ReuseResetFailed, "testenv", 2); n != 1 {
				t.Fatalf("failed resets at depth 2: %d, want 1 (events %+v)", n, log.events)
			}
			if err := os.Remove(knob); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// liveIDs lists the sandbox ids of the rig's instance that are live.
func (r *rig) liveIDs() []string {
	r.t.Helper()
	sbs, err := r.driver.List(context.Background(), map[string]string{"agentenv.instance": "episode-test"})
	if err != nil {
		r.t.Fatal(err)
	}
	var ids []string
	for _, sb := range sbs {
		ids = append(ids, sb.ID)
	}
	slices.Sort(ids)
	return ids
}

// Reuse never crosses envs: two envs of one bundle that ask for it keep
// their own deploys (the same binary, told apart by their tools' prefix),
// and an env that did not ask gets a fresh deploy every episode.
func TestReuseKeepsToEnvsThatAsk(t *testing.T) {
	task := func(env, prefix string) string {
		return fmt.Sprintf(`[
  {"id": "env", "type": "deploy_env", "env": %q},
  {"id": "load", "type": "call_tool", "tool": "%sload_puzzle", "arguments": {"target": 1}},
  {"id": "play", "type": "prompt_agent", "prompt": "Guess."},
  {"id": "grade", "type": "verify_tool", "tool": "%sgrade"}
]`, env, prefix, prefix)
	}
	dir := bundleFiles(t, nil, map[string]string{
		"envs/testenv/env.toml": testenvToml("", nil),
		"envs/a/env.toml":       testenvToml("reuse = 100\n", nil),
		"envs/b/env.toml":       testenvToml("reuse = 100\n", map[string]string{"TESTENV_PREFIX": "b_"}),
		"tasks/ta.json":         task("a", ""),
		"tasks/tb.json":         task("b", "b_"),
		"tasks/tfresh.json":     task("testenv", ""),
	})
	r, log := reuseRig(t, dir)
	play := func(id, guess string) {
		t.Helper()
		ep := r.play(episode.Request{TaskID: id})
		r.start(ep)
		obs := r.step(ep, call(guess, map[string]int{"value": 1}))
		if !strings.Contains(obs.Messages[0].Content, "correct") {
			t.Fatalf("%s: %+v", id, obs.Messages)
		}
		if obs = r.step(ep, "done"); !obs.Done || *obs.Reward != 1 {
			t.Fatalf("%s: %+v", id, obs)
		}
	}
	for range 3 {
		play("ta", "guess")
		play("tb", "b_guess")
	}
	if n := r.driver.deploys.Load(); n != 2 {
		t.Fatalf("three episodes each of two reusable envs: %d deploys, want 2", n)
	}
	for _, env := range []string{"a", "b"} {
		if got := log.count(episode.ReuseTaken, env, 0); got != 2 {
			t.Errorf("env %s: %d episodes on a reset env, want 2", env, got)
		}
	}
	play("tfresh", "guess")
	play("tfresh", "guess")
	if n := r.driver.deploys.Load(); n != 4 {
		t.Fatalf("an env without reuse: %d deploys after two of its episodes, want 4 in all", n)
	}
	if got := log.count(episode.ReuseReset, "testenv", 0); got != 0 {
		t.Errorf("an env that did not ask for reuse was reset %d times", got)
	}
}

// An env that asks for reuse but does not serve its reset tool fails its
// deploy with an error naming the tool, and is torn down.
func TestReuseWithoutResetTool(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{
		"envs/testenv/env.toml": testenvToml("reuse = 2\nreset_tool = \"p_wipe\"\n", map[string]string{"TESTENV_NO_RESET": "1"}),
		"tasks/puzzle.json":     puzzleTask(5, 2),
	})
	r, _ := reuseRig(t, dir)
	ep := r.play(episode.Request{TaskID: "puzzle"})
	_, err := ep.Start(context.Background())
	if episode.CodeOf(err) != episode.CodeDeploy || !strings.Contains(err.Error(), `does not serve its reset tool "p_wipe"`) {
		t.Fatalf("want DEPLOY_FAILED naming the reset tool, got %v", err)
	}
}
