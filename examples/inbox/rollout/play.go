package rollout

import (
	"context"
	"fmt"
	"strings"
)

// Policy writes the model's replies for one episode: given the last
// observation, the next reply.
type Policy interface {
	Reply(obs Observation) (string, error)
}

// NewPolicy makes the policy of one episode from its opening observation.
type NewPolicy func(opening Observation) (Policy, error)

// MaxSteps bounds an episode's steps, whatever the policy does.
const MaxSteps = 64

// Result is one played episode.
type Result struct {
	TaskID     string
	Reward     float64
	Metrics    map[string]float64
	Steps      int
	Transcript []Message // every message of the rollout, the replies as "assistant"
}

// Play plays one episode on a new session: reset, then the policy's
// replies until done. The session is closed whatever happens.
func Play(ctx context.Context, base, token string, reset Reset, newPolicy NewPolicy) (Result, error) {
	c, err := Dial(ctx, base, token)
	if err != nil {
		return Result{}, err
	}
	// A failed close loses nothing: the server tears down whatever episode
	// the session still holds when the connection goes.
	defer func() { _ = c.Close() }()
	obs, err := c.Reset(ctx, reset)
	if err != nil {
		return Result{}, fmt.Errorf("reset %+v: %w", reset, err)
	}
	res := Result{TaskID: obs.TaskID, Transcript: append([]Message(nil), obs.Messages...)}
	p, err := newPolicy(obs)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", obs.TaskID, err)
	}
	for !obs.Done {
		if res.Steps == MaxSteps {
			return Result{}, fmt.Errorf("%s: not done after %d steps", obs.TaskID, MaxSteps)
		}
		reply, err := p.Reply(obs)
		if err != nil {
			return Result{}, fmt.Errorf("%s, step %d: %w", obs.TaskID, res.Steps+1, err)
		}
		res.Transcript = append(res.Transcript, Message{Role: "assistant", Content: reply})
		if obs, err = c.Step(ctx, reply); err != nil {
			return Result{}, fmt.Errorf("%s, step %d: %w", res.TaskID, res.Steps+1, err)
		}
		res.Steps++
		res.Transcript = append(res.Transcript, obs.Messages...)
	}
	if obs.Reward == nil {
		return Result{}, fmt.Errorf("%s: done without a reward", res.TaskID)
	}
	res.Reward, res.Metrics = *obs.Reward, obs.Metrics
	return res, nil
}

// Render writes a transcript as `agentenv play` prints one: each message
// under its role.
func Render(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "[%s]\n%s\n\n", m.Role, m.Content)
	}
	return b.String()
}
