package baseline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/examples/gridsim/internal/envproc"
)

// Direct plays tasks against the env without the episode engine: it runs
// the env's build once, then per task starts the env's command as a fresh
// process, runs the task's call_tool setup and verify_tool steps itself
// over MCP, and lets the policy play in between. It is the way to play
// when no episode engine is at hand; Engine plays the real episode path.
type Direct struct {
	Bundle *bundle.Bundle

	once     sync.Once
	buildErr error
}

const callTimeout = 30 * time.Second

func (d *Direct) build(ctx context.Context, env *bundle.Env) error {
	d.once.Do(func() {
		if len(env.Build) == 0 {
			return
		}
		cmd := exec.CommandContext(ctx, env.Build[0], env.Build[1:]...)
		cmd.Dir = env.Dir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			d.buildErr = fmt.Errorf("env %s: build %v: %w\n%s", env.Name, env.Build, err, out.String())
		}
	})
	return d.buildErr
}

// Run plays one task.
func (d *Direct) Run(ctx context.Context, task *bundle.Task, p Policy) (Result, error) {
	var envName string
	for _, s := range task.Steps {
		if s.Type == bundle.StepDeployEnv {
			envName = s.Env
		}
	}
	env := d.Bundle.Envs[envName]
	if env == nil || len(env.Command) == 0 {
		return Result{}, fmt.Errorf("%s: env %q has no command to run", task.ID, envName)
	}
	if err := d.build(ctx, env); err != nil {
		return Result{}, err
	}
	if len(env.Command) > 1 {
		return Result{}, fmt.Errorf("%s: env %s: Direct runs a command without arguments, got %v", task.ID, env.Name, env.Command)
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	proc, err := envproc.Start(startCtx, filepath.Join(env.Dir, env.Command[0]))
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", task.ID, err)
	}
	defer proc.Stop()
	cs, err := proc.Connect(startCtx)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", task.ID, err)
	}
	defer cs.Close()
	c := &mcpCaller{cs: cs}

	res := Result{TaskID: task.ID, Grade: -1}
	for _, s := range task.Steps {
		switch s.Type {
		case bundle.StepCallTool:
			if text, isErr, err := c.Call(ctx, s.Tool, s.Arguments); err != nil || isErr {
				return Result{}, fmt.Errorf("%s: setup step %s (%s): %v%s", task.ID, s.ID, s.Tool, err, text)
			}
		case bundle.StepPromptAgent:
			if res.Schedule, err = Play(ctx, c, p, task.ID); err != nil {
				return Result{}, fmt.Errorf("%s: %w", task.ID, err)
			}
		case bundle.StepVerifyTool:
			text, isErr, err := c.Call(ctx, s.Tool, s.Arguments)
			if err != nil || isErr {
				return Result{}, fmt.Errorf("%s: verifier %s (%s): %v%s", task.ID, s.ID, s.Tool, err, text)
			}
			if res.Grade, err = strconv.ParseFloat(strings.TrimSpace(text), 64); err != nil {
				return Result{}, fmt.Errorf("%s: verifier %s answered %q, not a number", task.ID, s.ID, text)
			}
		case bundle.StepDeployEnv:
		default:
			return Result{}, fmt.Errorf("%s: Direct cannot play a %s step", task.ID, s.Type)
		}
	}
	if res.Grade < 0 {
		return Result{}, fmt.Errorf("%s: no verify_tool step scored the task", task.ID)
	}
	return res, nil
}

// mcpCaller calls tools straight over an MCP session.
type mcpCaller struct{ cs *mcp.ClientSession }

func (c *mcpCaller) Call(ctx context.Context, tool string, args any) (string, bool, error) {
	if raw, ok := args.(json.RawMessage); ok && len(raw) == 0 {
		args = map[string]any{}
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", false, err
	}
	var b strings.Builder
	for _, content := range res.Content {
		if t, ok := content.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String(), res.IsError, nil
}
