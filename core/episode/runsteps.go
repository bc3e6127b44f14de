package episode

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/agentenv/agentenv/core/bundle"
)

// callSetup runs a call_tool step. A tool error fails the episode: the
// task cannot be played from a broken setup.
func (ep *episode) callSetup(ctx context.Context, s *bundle.Step) error {
	le, err := ep.env(s.Env)
	if err != nil {
		return err
	}
	res, err := le.client.CallTool(ctx, s.Tool, s.Arguments, ep.e.cfg.ToolCallTimeout)
	if err != nil {
		return withBrief(fmt.Errorf("call_tool step %q: %w", s.ID, err), "setup step %q (%s on env %q) failed", s.ID, s.Tool, s.Env)
	}
	if res.IsError {
		return withBrief(fmt.Errorf("call_tool step %q: %s on env %q answered with an error: %s", s.ID, s.Tool, s.Env, res.Text),
			"setup step %q (%s on env %q) answered with an error", s.ID, s.Tool, s.Env)
	}
	return nil
}

// verify runs a verifier step and returns its score.
func (ep *episode) verify(ctx context.Context, s *bundle.Step) (float64, error) {
	cfg := ep.e.cfg
	switch s.Type {
	case bundle.StepVerifyTool:
		le, err := ep.env(s.Env)
		if err != nil {
			return 0, err
		}
		res, err := le.client.CallTool(ctx, s.Tool, s.Arguments, cfg.VerifyTimeout)
		if err != nil {
			return 0, callFailure(err, s.Env, le.sb.ID, fmt.Sprintf("verify_tool step %q (%s)", s.ID, s.Tool), ep.e.explain(ctx, le, err))
		}
		if res.IsError {
			return 0, fmt.Errorf("%s on env %q answered with an error: %s", s.Tool, s.Env, res.Text)
		}
		score, ok := parseScore(res.Text)
		if !ok {
			return 0, fmt.Errorf("%s on env %q answered %q, not a number", s.Tool, s.Env, clip(res.Text, 200))
		}
		return score, nil
	case bundle.StepVerifyAnswer:
		answer, ran := ep.answers[s.Turn]
		if !ran {
			return 0, nil // max_turns kept the turn from opening: nothing to credit
		}
		if s.Regexp != nil {
			return boolScore(s.Regexp.MatchString(answer)), nil
		}
		return boolScore(strings.TrimSpace(answer) == strings.TrimSpace(s.Expected)), nil
	case bundle.StepVerifyCommand:
		le, err := ep.env(s.Env)
		if err != nil {
			return 0, err
		}
		vctx, cancel := context.WithTimeout(ctx, cfg.VerifyTimeout)
		defer cancel()
		res, err := cfg.Sandbox.Exec(vctx, le.sb, s.Command)
		if err != nil {
			return 0, fmt.Errorf("running %q in env %q: %w", s.Command, s.Env, err)
		}
		if score, ok := parseScore(res.Stdout); ok {
			return score, nil
		}
		if isNumber(res.Stdout) { // NaN or ±Inf: a broken score, not "no score printed"
			return 0, fmt.Errorf("%q in env %q printed %q, not a finite number", s.Command, s.Env, clip(strings.TrimSpace(res.Stdout), 200))
		}
		return boolScore(res.ExitCode == 0), nil
	}
	return 0, fmt.Errorf("step type %q is not a verifier", s.Type)
}

// parseScore reads text that is exactly one finite number.
func parseScore(text string) (float64, bool) {
	v, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// isNumber reports whether text is one number, finite or not.
func isNumber(text string) bool {
	_, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
	return err == nil || errors.Is(err, strconv.ErrRange)
}

func boolScore(ok bool) float64 {
	if ok {
		return 1
	}
	return 0
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// reward turns the episode's scores into its reward.
func (ep *episode) reward(ctx context.Context) (float64, error) {
	cfg := ep.e.cfg
	switch {
	case len(ep.scores) == 0:
		return 0, fmt.Errorf("task %s ended with no score: no verifier ran", ep.task.ID)
	case cfg.RewardStep != "":
		v, ok := ep.scores[cfg.RewardStep]
		if !ok {
			return 0, fmt.Errorf("task %s has no score %q (reward score:%s)", ep.task.ID, cfg.RewardStep, cfg.RewardStep)
		}
		return v, nil
	case cfg.Reward != nil:
		rctx, cancel := context.WithTimeout(ctx, cfg.VerifyTimeout)
		defer cancel()
		v, err := cfg.Reward.Combine(rctx, ep.scores)
		if err != nil {
			return 0, fmt.Errorf("combining scores %v: %w", ep.scores, err)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("the reward plugin combined %v into %v", ep.scores, v)
		}
		return v, nil
	case len(ep.scores) == 1:
		for _, v := range ep.scores {
			return v, nil
		}
	}
	return 0, fmt.Errorf("task %s has %d scores (%s) and no reward combines them: serve with --reward mean, or --reward score:<name> to pick one",
		ep.task.ID, len(ep.scores), strings.Join(sortedScoreNames(ep.scores), ", "))
}

func sortedScoreNames(scores map[string]float64) []string {
	names := make([]string, 0, len(scores))
	for k := range scores {
		names = append(names, k)
	}
	sortStrings(names)
	return names
}
