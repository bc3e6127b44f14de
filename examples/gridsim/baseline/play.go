package baseline

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentenv/agentenv/examples/gridsim/gridenv"
)

// Caller runs one of the model's tool calls and returns the tool's answer
// as the model sees it. isError marks an answer the env flagged as an
// error (a refused schedule).
type Caller interface {
	Call(ctx context.Context, tool string, args any) (text string, isError bool, err error)
}

// Play plays policy p on the day behind c as a model would: read the day
// with get_prices, then submit the policy's schedule. It returns the
// schedule submitted. A refused schedule is an error: every policy here
// submits valid ones.
func Play(ctx context.Context, c Caller, p Policy, taskID string) ([]int, error) {
	text, isErr, err := c.Call(ctx, gridenv.ToolPrices, map[string]any{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gridenv.ToolPrices, err)
	}
	if isErr {
		return nil, fmt.Errorf("%s answered an error: %s", gridenv.ToolPrices, text)
	}
	var got gridenv.Day
	if err := json.Unmarshal([]byte(text), &got); err != nil {
		return nil, fmt.Errorf("%s answered %q: %w", gridenv.ToolPrices, text, err)
	}
	day, err := got.Market()
	if err != nil {
		return nil, fmt.Errorf("%s answered a bad day: %w", gridenv.ToolPrices, err)
	}
	schedule := p.Schedule(day, taskID)
	text, isErr, err = c.Call(ctx, gridenv.ToolSubmit, map[string]any{"schedule": schedule})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gridenv.ToolSubmit, err)
	}
	if isErr {
		return nil, fmt.Errorf("%s refused the %s schedule %v: %s", gridenv.ToolSubmit, p.Name(), schedule, text)
	}
	return schedule, nil
}
