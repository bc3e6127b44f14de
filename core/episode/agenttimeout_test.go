package episode_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/episode"
)

// A turn whose own time ran out (a Harbor task's [agent] timeout_sec) runs
// no further tool call; the reply ends the episode's turns, the verifiers
// score it, and the cause is agent_timeout, the model's.
func TestAgentTimeoutEndsTheTurn(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(3, 1)})
	r := newRig(t, dir, rigOptions{})
	for i := range r.bundle.Tasks[0].Steps {
		if s := &r.bundle.Tasks[0].Steps[i]; s.Type == "prompt_agent" {
			s.Timeout = time.Nanosecond // out of time before any reply
		}
	}
	ep := r.play(episode.Request{TaskID: "puzzle"})
	defer ep.Close(t.Context())
	r.start(ep)
	obs := r.step(ep, call("add", map[string]int{"n": 2}))
	if !obs.Done || obs.Reward == nil || *obs.Reward != 0 {
		t.Fatalf("observation %+v: want the episode scored (0: the add never ran)", obs)
	}
	if len(obs.Messages) != 1 || !strings.Contains(obs.Messages[0].Content, "time for the agent ran out") {
		t.Fatalf("messages %+v: want the call refused for lack of time", obs.Messages)
	}
	res := ep.Result()
	if res.Cause != episode.CauseAgentTimeout || episode.SourceOf(res.Cause) != episode.SourceModel {
		t.Fatalf("cause %q (source %q)", res.Cause, episode.SourceOf(res.Cause))
	}
}
