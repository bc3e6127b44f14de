package episode_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// stuckParser reads nothing until released, whatever its context says:
// a parser's worst case (a radix literal took 35-48 s of a core).
type stuckParser struct{ release chan struct{} }

func (stuckParser) Info() sdk.Info {
	return sdk.Info{Name: "stuck", Kind: sdk.KindToolFormat, Version: "1", Protocols: []int{sdk.ProtocolVersion}}
}

func (p stuckParser) Parse(context.Context, string, []toolformat.Tool) (toolformat.Parsed, error) {
	<-p.release
	return toolformat.Parsed{}, nil
}

// A reply whose parse runs past the parse time limit is answered as one
// call that could not be read, and the episode goes on; a step whose
// client went away stops waiting for its parse at once. Both held the
// step, its slot and SIGTERM for as long as the parser ran.
func TestParseTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	r := newRig(t, dir, rigOptions{tune: func(c *episode.Config) {
		c.Limits.ParseTimeout = 300 * time.Millisecond
		hermes := c.ToolFormat
		c.ToolFormat = func(name string) (toolformat.Parser, error) {
			if name == "stuck" {
				return toolformat.NewLocal(stuckParser{release}, nil), nil
			}
			return hermes(name)
		}
	}})
	ep := r.play(episode.Request{TaskID: "puzzle", ToolFormat: "stuck"})
	r.start(ep)
	obs, err := ep.Step(context.Background(), call("add", map[string]any{"n": 3}))
	if err != nil {
		t.Fatalf("a reply whose parse ran out of time failed the episode: %v", err)
	}
	msgs := contents(obs.Messages)
	if len(msgs) != 1 || !strings.Contains(msgs[0], "took longer than 300ms") || obs.Done {
		t.Fatalf("answer to a reply that could not be read in time: done %v, %q", obs.Done, msgs)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := ep.Step(ctx, "again"); done <- err }()
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a step whose client went away mid-parse succeeded")
	}
}
