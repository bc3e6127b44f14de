package episode

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/envclient"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// liveEnv is a deployed env: its sandbox, MCP session and tools.
type liveEnv struct {
	name   string
	sb     sandbox.Sandbox
	client *envclient.Client // nil until connected
	tools  []envclient.Tool
}

// deployEnv builds (once), deploys, connects to and lists the tools of an
// env, within the deploy timeout. On failure nothing is left running.
func (e *Engine) deployEnv(ctx context.Context, name string, labels map[string]string) (*liveEnv, error) {
	env, ok := e.cfg.Bundle.Envs[name]
	if !ok {
		return nil, fmt.Errorf("no env %q in the bundle", name)
	}
	if err := e.ensureBuilt(ctx, env); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.DeployTimeout)
	defer cancel()
	all := make(map[string]string, len(e.cfg.Labels)+len(labels))
	for k, v := range e.cfg.Labels {
		all[k] = v
	}
	for k, v := range labels {
		all[k] = v
	}
	// A nonce per deploy finds the sandbox should the call fail after the
	// plugin deployed it (a deadline racing the reply).
	nonce := newEpisodeID()
	all[deployLabel] = nonce
	start := time.Now()
	sb, err := e.cfg.Sandbox.Deploy(ctx, sandbox.Spec{
		Env: env.Name, Dir: env.Dir, Image: env.Image, Command: env.Command, Port: env.Port,
		EnvVars: env.EnvVars, CPU: env.CPU, MemoryMB: env.MemoryMB, Labels: all,
	})
	if err != nil {
		e.reapDeploy(ctx, nonce)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("deploying env %q: not ready within %s (the deploy timeout): %w", name, e.cfg.DeployTimeout, err)
		}
		return nil, fmt.Errorf("deploying env %q: %w", name, err)
	}
	le := &liveEnv{name: name, sb: sb}
	fail := func(err error) (*liveEnv, error) {
		if terr := e.teardown(context.WithoutCancel(ctx), []*liveEnv{le}); terr != nil {
			err = errors.Join(err, terr)
		}
		return nil, err
	}
	le.client, err = envclient.Connect(ctx, sb.Endpoint, envclient.Options{})
	if err != nil {
		return fail(fmt.Errorf("env %q deployed as %s but its MCP server does not answer: %w", name, sb.ID, err))
	}
	le.tools, err = le.client.ListTools(ctx)
	if err != nil {
		return fail(fmt.Errorf("env %q: %w", name, err))
	}
	e.log.Debug("env deployed", "env", name, "sandbox", sb.ID, "endpoint", sb.Endpoint, "tools", len(le.tools), "took", time.Since(start))
	return le, nil
}

// deployLabel carries the nonce of one Deploy call.
const deployLabel = "agentenv.deploy"

// reapDeploy terminates whatever a failed Deploy call left behind.
func (e *Engine) reapDeploy(ctx context.Context, nonce string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.TeardownTimeout)
	defer cancel()
	left, err := e.cfg.Sandbox.List(rctx, map[string]string{deployLabel: nonce})
	if err != nil {
		e.log.Warn("listing sandboxes after a failed deploy", "error", err)
		return
	}
	for _, sb := range left {
		e.log.Warn("terminating a sandbox a failed deploy left", "sandbox", sb.ID)
		if err := e.cfg.Sandbox.Terminate(rctx, sb.ID); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			e.log.Error("terminating a sandbox a failed deploy left", "sandbox", sb.ID, "error", err)
		}
	}
}

// teardown closes the envs' sessions and terminates their sandboxes, each
// within the teardown timeout, whatever ctx's state (it must run on
// cancel too). A sandbox already gone is not an error.
func (e *Engine) teardown(ctx context.Context, envs []*liveEnv) error {
	var errs []error
	for i := len(envs) - 1; i >= 0; i-- {
		le := envs[i]
		if le.client != nil {
			_ = le.client.Close()
		}
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.TeardownTimeout)
		err := e.cfg.Sandbox.Terminate(tctx, le.sb.ID)
		cancel()
		if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			errs = append(errs, fmt.Errorf("terminating env %q (sandbox %s): %w", le.name, le.sb.ID, err))
		}
	}
	return errors.Join(errs...)
}

// callSetup runs a call_tool step. A tool error fails the episode: the
// task cannot be played from a broken setup.
func (ep *episode) callSetup(ctx context.Context, s *bundle.Step) error {
	le, err := ep.env(s.Env)
	if err != nil {
		return err
	}
	res, err := le.client.CallTool(ctx, s.Tool, s.Arguments, ep.e.cfg.ToolCallTimeout)
	if err != nil {
		return fmt.Errorf("call_tool step %q: %w", s.ID, err)
	}
	if res.IsError {
		return fmt.Errorf("call_tool step %q: %s on env %q answered with an error: %s", s.ID, s.Tool, s.Env, res.Text)
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
			return 0, err
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
		res, err := cfg.Sandbox.Exec(vctx, le.sb.ID, s.Command)
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
	return 0, fmt.Errorf("task %s has %d scores and no reward combines them", ep.task.ID, len(ep.scores))
}
