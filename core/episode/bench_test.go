package episode_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/envclient"
	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// BenchmarkStep measures one model reply with one tool call, end to end
// through the engine (hermes plugin over gRPC, schema check, MCP call on
// the env), against the floor of the same call made directly with the
// MCP client on an env deployed the same way. step/floor is the engine's
// overhead factor.
func BenchmarkStep(b *testing.B) {
	dir := bundleFiles(b, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	r := newRig(b, dir, rigOptions{})
	ctx := context.Background()

	// Floor: a direct MCP call to an env in its own sandbox.
	sb, err := r.driver.Deploy(ctx, sandbox.Spec{Env: "testenv", Command: []string{testenvBin},
		Labels: map[string]string{"agentenv.instance": "episode-test"}})
	if err != nil {
		b.Fatal(err)
	}
	defer r.driver.Terminate(ctx, sb)
	c, err := envclient.Connect(ctx, sb.Endpoint, envclient.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	args := []byte(`{"text":"hi"}`)
	for range 20 { // warm up the connection
		_, _ = c.CallTool(ctx, "echo", args, 5*time.Second)
	}

	ep, err := r.engine.Play(episode.Request{TaskID: "puzzle"})
	if err != nil {
		b.Fatal(err)
	}
	defer ep.Close(ctx)
	if _, err := ep.Start(ctx); err != nil {
		b.Fatal(err)
	}
	reply := "Let me echo.\n" + call("echo", map[string]any{"text": "hi"}) + "<|im_end|>"
	// Floor and step alternate, so load on the machine hits both alike.
	var floor, step time.Duration
	n := 0
	for b.Loop() {
		t0 := time.Now()
		if _, err := c.CallTool(ctx, "echo", args, 5*time.Second); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := ep.Step(ctx, reply); err != nil {
			b.Fatal(err)
		}
		floor += t1.Sub(t0)
		step += time.Since(t1)
		n++
	}
	b.ReportMetric(float64(floor.Microseconds())/float64(n), "floor-µs/call")
	b.ReportMetric(float64(step.Microseconds())/float64(n), "step-µs")
	b.ReportMetric(float64(step)/float64(floor), "step/floor")
}
