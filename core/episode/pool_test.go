package episode_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/agentenv/agentenv/sdk/toolformat"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// warmIDs lists the ids of the live sandboxes the warm pool deployed.
func (r *rig) warmIDs() []string {
	r.t.Helper()
	sbs, err := r.driver.List(context.Background(), map[string]string{"agentenv.instance": "episode-test", sandbox.LabelEpisode: episode.WarmEpisode})
	if err != nil {
		r.t.Fatal(err)
	}
	var ids []string
	for _, sb := range sbs {
		ids = append(ids, sb.ID)
	}
	sort.Strings(ids)
	return ids
}

// waitWarm waits until the pool holds ready sandboxes and deploys none.
func (r *rig) waitWarm(ready int) {
	r.t.Helper()
	wait.For(r.t, fmt.Sprintf("%d warm sandboxes ready", ready), func() error {
		if got, deploying := r.engine.WarmReady("testenv"); got != ready || deploying != 0 {
			return fmt.Errorf("%d ready, %d deploying", got, deploying)
		}
		return nil
	})
}

// warmRig is a rig with a warm pool of n per env, logging at info into
// the returned buffer.
func warmRig(n int) (rigOptions, *lockedBuffer) {
	logs := &lockedBuffer{}
	return rigOptions{tune: func(c *episode.Config) {
		c.Warm = n
		c.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: logs})
	}}, logs
}

// closeFirst closes the engine before the rig's own check that nothing is
// live (cleanups run last-registered first): the pool's sandboxes are the
// engine's until it closes.
func (r *rig) closeFirst() {
	r.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.engine.Close(ctx); err != nil {
			r.t.Errorf("Close: %v", err)
		}
	})
}

// A reset takes a ready sandbox and another is deployed behind it; each
// episode gets its own, never one an episode had; closing the engine tears
// the pool down.
func TestWarmPoolTakesAndRefills(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	opts, logs := warmRig(2)
	r := newRig(t, dir, opts)
	r.closeFirst()
	r.waitWarm(2)
	before := r.warmIDs()
	if len(before) != 2 || r.driver.deploys.Load() != 2 {
		t.Fatalf("warm sandboxes %v after %d deploys; want 2 of 2", before, r.driver.deploys.Load())
	}
	var used []string
	for i := range 2 {
		ep := r.play(episode.Request{TaskID: "puzzle"})
		r.start(ep)
		// The engine logs the sandbox an episode takes.
		m := regexp.MustCompile(`took a warm sandbox: episode=` + ep.ID() + ` env=testenv sandbox=(\S+)`).FindStringSubmatch(logs.String())
		if m == nil || !contains(before, m[1]) {
			t.Fatalf("episode %d took no warm sandbox of %v; log:\n%s", i, before, logs.String())
		}
		used = append(used, m[1])
		r.step(ep, call("add", map[string]any{"n": 3}))
		if obs := r.step(ep, "Done."); !obs.Done || *obs.Reward != 1 {
			t.Fatalf("episode %d on a warm sandbox: %+v", i, obs)
		}
		r.waitWarm(2)
		if err := r.engine.Idle(context.Background()); err != nil {
			t.Fatal(err)
		}
		before = r.warmIDs()
		for _, u := range used {
			if contains(before, u) {
				t.Fatalf("sandbox %s of an ended episode is still live: %v", u, before)
			}
		}
	}
	if got := r.driver.deploys.Load(); got != 4 {
		t.Errorf("%d deploys for 2 warm + 2 refills", got)
	}
}

// The pool counts against WarmLimit: with room for two sandboxes and one
// episode live, one stays warm; the episode's end makes room again.
func TestWarmPoolCountsAgainstLimit(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	r := newRig(t, dir, rigOptions{tune: func(c *episode.Config) { c.Warm, c.WarmLimit = 3, 2 }})
	r.closeFirst()
	r.waitWarm(2)
	ep := r.play(episode.Request{TaskID: "puzzle"})
	r.start(ep)
	// An absence: a refill, were one wrongly started, would be under way.
	// The window cannot make a right engine fail.
	time.Sleep(300 * time.Millisecond)
	if ready, deploying := r.engine.WarmReady("testenv"); ready != 1 || deploying != 0 {
		t.Fatalf("with one episode live under a limit of 2: %d warm, %d deploying; want 1, 0", ready, deploying)
	}
	if obs := r.step(ep, "Done."); !obs.Done {
		t.Fatalf("episode did not end: %+v", obs)
	}
	r.waitWarm(2)
	if got := r.driver.deploys.Load(); got != 3 {
		t.Errorf("%d deploys, want 3 (2 warm, 1 after the episode freed room)", got)
	}
}

// A warm sandbox that died while waiting is torn down at take, and the
// episode gets another.
func TestWarmPoolSkipsADeadSandbox(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	opts, logs := warmRig(1)
	r := newRig(t, dir, opts)
	r.closeFirst()
	r.waitWarm(1)
	warm := r.warmIDs()
	sbs, _ := r.driver.List(context.Background(), map[string]string{sandbox.LabelEpisode: episode.WarmEpisode, "agentenv.instance": "episode-test"})
	if err := r.driver.Driver.Terminate(context.Background(), sbs[0]); err != nil { // behind the pool's back
		t.Fatal(err)
	}
	ep := r.play(episode.Request{TaskID: "puzzle"})
	r.start(ep)
	r.step(ep, call("add", map[string]any{"n": 3}))
	if obs := r.step(ep, "Done."); !obs.Done || *obs.Reward != 1 {
		t.Fatalf("episode after a dead warm sandbox: %+v", obs)
	}
	if contains(r.warmIDs(), warm[0]) {
		t.Fatal("the dead sandbox is still listed")
	}
	if !strings.Contains(logs.String(), "a warm sandbox stopped answering; tearing it down: env=testenv sandbox="+warm[0]) {
		t.Errorf("the take did not find the dead sandbox; log:\n%s", logs.String())
	}
}

// An env that cannot deploy is retried with a growing pause, not in a
// loop. The driver is a fake that fails in process, so the engine runs in
// a synctest bubble: the schedule is checked to the instant, in no time.
func TestWarmPoolBacksOffFailedDeploys(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	synctest.Test(t, func(t *testing.T) {
		d := &failingDriver{}
		e, err := episode.NewEngine(episode.Config{
			Bundle:     mustLoad(t, dir),
			Sandbox:    d,
			ToolFormat: func(string) (toolformat.Parser, error) { return nil, errors.New("no tool format in this test") },
			Logger:     hclog.NewNullLogger(),
			Warm:       2,
		})
		if err != nil {
			t.Fatal(err)
		}
		// Two at once, then two after each pause: 1s, 2s, 4s, 8s, 16s,
		// then 30s at most.
		start := time.Now()
		for _, tc := range []struct {
			at    time.Duration
			total int64
		}{{0, 2}, {time.Second, 4}, {3 * time.Second, 6}, {7 * time.Second, 8}, {15 * time.Second, 10}, {31 * time.Second, 12}, {61 * time.Second, 14}} {
			time.Sleep(tc.at - time.Since(start) - time.Nanosecond)
			synctest.Wait()
			if got := d.deploys.Load(); got != tc.total-2 && tc.at > 0 {
				t.Fatalf("%d deploys just before %s, want %d", got, tc.at, tc.total-2)
			}
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			if got := d.deploys.Load(); got != tc.total {
				t.Fatalf("%d deploys at %s, want %d", got, tc.at, tc.total)
			}
		}
		if err := e.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// failingDriver is a sandbox driver whose deploys fail at once.
type failingDriver struct {
	nopDriver
	deploys atomic.Int64
}

func (d *failingDriver) Deploy(context.Context, sandbox.Spec) (sandbox.Sandbox, error) {
	d.deploys.Add(1)
	return sandbox.Sandbox{}, errors.New("the env failed to start")
}

// lockedBuffer is a log sink safe for the engine's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
