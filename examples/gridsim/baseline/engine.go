package baseline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/episode"
)

// GradeStep is the id of GridSim's verifier step; its score is the grade.
const GradeStep = "grade"

// Engine plays tasks as real episodes through a Player (the episode
// engine): the env is deployed by the engine's sandbox, the setup and the
// verifier are the task's own steps, and the policy's moves reach the env
// as hermes tool calls in replies, parsed by the engine's tool-call format.
type Engine struct {
	Player episode.Player
	// ToolFormat names the format the replies are written in; only
	// "hermes" (or "" for the engine's default, which must be hermes) is
	// written here.
	ToolFormat string
}

// Run plays one task as one episode: read the prices, submit, then a reply
// without a tool call ends the turn and the engine scores the episode.
func (e *Engine) Run(ctx context.Context, task *bundle.Task, p Policy) (res Result, err error) {
	if e.ToolFormat != "" && e.ToolFormat != "hermes" {
		return Result{}, fmt.Errorf("baseline replies are written as hermes tool calls, not %s", e.ToolFormat)
	}
	ep, err := e.Player.Play(episode.Request{TaskID: task.ID, ToolFormat: e.ToolFormat})
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", task.ID, err)
	}
	defer func() {
		if cerr := ep.Close(context.WithoutCancel(ctx)); cerr != nil && err == nil {
			err = fmt.Errorf("%s: closing the episode: %w", task.ID, cerr)
		}
	}()
	if _, err := ep.Start(ctx); err != nil {
		return Result{}, fmt.Errorf("%s: starting the episode: %w", task.ID, err)
	}
	c := &episodeCaller{ep: ep}
	schedule, err := Play(ctx, c, p, task.ID)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", task.ID, err)
	}
	obs, err := ep.Step(ctx, "The schedule is submitted.")
	if err != nil {
		return Result{}, fmt.Errorf("%s: ending the turn: %w", task.ID, err)
	}
	if !obs.Done || obs.Reward == nil {
		return Result{}, fmt.Errorf("%s: a reply without a tool call did not end the episode", task.ID)
	}
	grade, ok := obs.Metrics["score/"+GradeStep]
	if !ok {
		return Result{}, fmt.Errorf("%s: the episode recorded no score/%s (metrics %v)", task.ID, GradeStep, obs.Metrics)
	}
	if grade != *obs.Reward {
		return Result{}, fmt.Errorf("%s: reward %v is not the grade %v", task.ID, *obs.Reward, grade)
	}
	return Result{TaskID: task.ID, Grade: grade, Schedule: schedule}, nil
}

// episodeCaller makes a tool call the way a model does: a reply holding one
// hermes <tool_call>, answered by one tool message.
type episodeCaller struct{ ep episode.Episode }

// toolErrorPrefix starts the engine's tool message for a tool that answered
// with an error.
const toolErrorPrefix = "Error: "

func (c *episodeCaller) Call(ctx context.Context, tool string, args any) (string, bool, error) {
	call, err := json.Marshal(map[string]any{"name": tool, "arguments": args})
	if err != nil {
		return "", false, fmt.Errorf("encoding the call: %w", err)
	}
	obs, err := c.ep.Step(ctx, "<tool_call>\n"+string(call)+"\n</tool_call>")
	if err != nil {
		return "", false, err
	}
	if obs.Done {
		return "", false, errors.New("the episode ended on a tool call")
	}
	var answers []string
	for _, m := range obs.Messages {
		if m.Role == "tool" {
			answers = append(answers, m.Content)
		}
	}
	if len(answers) != 1 {
		return "", false, fmt.Errorf("one tool call got %d tool messages: %q", len(answers), answers)
	}
	text := answers[0]
	if strings.HasPrefix(text, toolErrorPrefix) {
		return strings.TrimPrefix(text, toolErrorPrefix), true, nil
	}
	return text, false, nil
}
