package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/agentenv/agentenv/client"
)

// GridSim's scripted episode: look at the prices, submit an idle schedule,
// say done (a reply without a tool call ends the turn).
var gridsimReplies = []string{
	"<tool_call>\n" + `{"name": "get_prices", "arguments": {}}` + "\n</tool_call>",
	"<tool_call>\n" + `{"name": "submit_schedule", "arguments": {"schedule": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}}` + "\n</tool_call>",
	"Done.",
}

// loadReplies reads a replies file (one JSON string per line), or returns
// GridSim's script.
func loadReplies(path string) ([]string, error) {
	if path == "" {
		return gridsimReplies, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var r string
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: want one JSON string per line: %w", path, line, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no replies", path)
	}
	return out, nil
}

// rollout is one rollout's record.
type rollout struct {
	wall     time.Duration      // from the first reset to the final observation, think time and replays included
	times    map[string]float64 // the final observation's phase times (seconds)
	attempts int
	failed   bool
	turns    int
}

// step is one training step's record.
type step struct {
	wall     time.Duration
	cpu      time.Duration // the server's CPU time during the step
	cpuBy    map[string]time.Duration
	alloc    float64 // bytes serve's Go heap allocated during the step
	reuses   float64 // episodes given a reset env (agentenv_env_reuses_total)
	peakRSS  int64
	rollouts []rollout
}

// playStep plays one step: o.n rollouts, o.c at once.
func playStep(ctx context.Context, o options, srv *server, index int) (step, error) {
	c, err := client.New(srv.url, client.Options{})
	if err != nil {
		return step{}, err
	}
	before := srv.usage()
	beforeBy := srv.cpuByProcess()
	alloc0 := scrapeSum(srv.url, "go_memstats_alloc_bytes_total", "")
	reuses0 := scrapeSum(srv.url, "agentenv_env_reuses_total", "")
	peak := before.rss
	stopSampling := make(chan struct{})
	sampled := make(chan int64)
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				peak = max(peak, srv.usage().rss)
			case <-stopSampling:
				sampled <- peak
				return
			}
		}
	}()
	out := make([]rollout, o.n)
	errs := make([]error, o.n)
	work := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range o.c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				// Groups of G rollouts play one task; each step takes the
				// next tasks of the split.
				task := (index*o.n + i) / o.g
				out[i], errs[i] = playRollout(ctx, o, c, task, fmt.Sprintf("s%d-r%d", index, i))
			}
		}()
	}
	for i := range o.n {
		work <- i
	}
	close(work)
	wg.Wait()
	st := step{wall: time.Since(start), rollouts: out}
	close(stopSampling)
	st.peakRSS = <-sampled
	st.cpu = srv.usage().cpu - before.cpu
	st.cpuBy = srv.cpuByProcess()
	st.alloc = scrapeSum(srv.url, "go_memstats_alloc_bytes_total", "") - alloc0
	st.reuses = scrapeSum(srv.url, "agentenv_env_reuses_total", "") - reuses0
	for k, v := range beforeBy {
		st.cpuBy[k] -= v
	}
	if err := errors.Join(errs...); err != nil {
		return st, err
	}
	return st, nil
}

// playRollout plays task index's episode, played again from the start
// when the env fails it (as AgentEnvGenerator replays), up to o.attempts.
func playRollout(ctx context.Context, o options, c *client.Client, index int, label string) (rollout, error) {
	start := time.Now()
	var last error
	for attempt := 1; attempt <= o.attempts; attempt++ {
		r, err := playOnce(ctx, o, c, index, fmt.Sprintf("trainstep-%s-a%d", label, attempt))
		if err == nil {
			r.wall, r.attempts = time.Since(start), attempt
			return r, nil
		}
		if errors.Is(err, client.CodeValidation) || errors.Is(err, client.CodeNotFound) || ctx.Err() != nil {
			return rollout{}, err // the request's fault: no replay helps
		}
		// Each replay says why, so a run's replays can be explained.
		fmt.Fprintf(os.Stderr, "replay: rollout %s attempt %d: %v\n", label, attempt, err)
		last = err
	}
	return rollout{wall: time.Since(start), attempts: o.attempts, failed: true}, fmt.Errorf("rollout %s failed %d attempts: %w", label, o.attempts, last)
}

func playOnce(ctx context.Context, o options, c *client.Client, index int, episodeID string) (rollout, error) {
	// One session per rollout, as agentenv_skyrl's env opens one.
	rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	sess, err := c.Connect(rctx)
	if err != nil {
		return rollout{}, err
	}
	defer sess.Close()
	res, err := sess.Reset(rctx, client.ResetRequest{Split: o.split, Index: index, MaxTurns: o.turns, EpisodeID: episodeID})
	if err != nil {
		return rollout{}, err
	}
	for turn := 0; !res.Done; turn++ {
		if o.think > 0 {
			select {
			case <-time.After(o.think):
			case <-rctx.Done():
				return rollout{}, rctx.Err()
			}
		}
		reply := o.replies[min(turn, len(o.replies)-1)]
		if res, err = sess.Step(rctx, reply); err != nil {
			return rollout{}, err
		}
	}
	return rollout{times: res.Observation.Times, turns: res.Observation.Turn}, nil
}
