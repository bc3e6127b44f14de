package baseline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/core/runtime"
	local "github.com/agentenv/agentenv/plugins/sandbox-local"
	hermes "github.com/agentenv/agentenv/plugins/toolformat-hermes"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// Instance labels every sandbox the baselines deploy.
const Instance = "gridsim-baseline"

// Local is an open runtime over the in-process local sandbox.
type Local struct {
	*runtime.Runtime
	Sandbox *local.Plugin
}

// Close closes the runtime, which tears its envs down, then has the
// sandbox remove the files it kept of them for later deploys (its
// spares), as a plugin process does when the host stops it.
func (l *Local) Close(ctx context.Context) error {
	return errors.Join(l.Runtime.Close(ctx), l.Sandbox.Cleanup())
}

// LeftOver lists the sandboxes the baselines deployed that are still up,
// once the engine's background teardowns are done.
func (l *Local) LeftOver(ctx context.Context) ([]string, error) {
	if err := l.Engine.Idle(ctx); err != nil {
		return nil, err
	}
	boxes, err := l.Sandbox.List(ctx, map[string]string{sandbox.LabelServer: Instance})
	if err != nil {
		return nil, fmt.Errorf("listing sandboxes: %w", err)
	}
	ids := make([]string, len(boxes))
	for i, b := range boxes {
		ids[i] = b.ID
	}
	return ids, nil
}

// LocalEngine opens the bundle in dir on the runtime `agentenv serve`
// uses, with the local process sandbox and the hermes tool-call format run
// in this process (only the plugin RPC is left out). stateDir holds the
// sandbox's state files ("" = its default). Close it when done.
func LocalEngine(ctx context.Context, dir, stateDir string, log hclog.Logger) (*Local, error) {
	sb := local.New()
	if log != nil {
		sb.SetLogger(log.Named("sandbox-local"))
	}
	// Process mode even where Docker runs: the baselines measure the
	// policies, not the sandbox.
	settings := map[string]string{"mode": "process"}
	if stateDir != "" {
		settings["state_dir"] = stateDir
	}
	cfg, err := json.Marshal(settings)
	if err != nil {
		return nil, fmt.Errorf("configuring the local sandbox: %w", err)
	}
	if err := sb.Configure(ctx, cfg); err != nil {
		return nil, fmt.Errorf("configuring the local sandbox: %w", err)
	}
	formats := func(name string) (toolformat.Parser, error) {
		if name != "hermes" {
			return nil, fmt.Errorf("only hermes is built into the baselines, not %q", name)
		}
		return hermes.New(), nil
	}
	rt, err := runtime.Open(ctx, dir, runtime.Options{
		SandboxDriver: sb, ToolFormats: formats, ToolFormat: "hermes",
		ServerID: Instance, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	return &Local{Runtime: rt, Sandbox: sb}, nil
}
