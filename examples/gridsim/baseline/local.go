package baseline

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/episode"
	local "github.com/agentenv/agentenv/plugins/sandbox-local"
	hermes "github.com/agentenv/agentenv/plugins/toolformat-hermes"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// Instance labels every sandbox the baselines deploy.
const Instance = "gridsim-baseline"

// Local is an episode engine with its sandbox.
type Local struct {
	Engine  *episode.Engine
	Sandbox *local.Plugin
}

// LeftOver lists the sandboxes the baselines deployed that are still up.
func (l *Local) LeftOver(ctx context.Context) ([]string, error) {
	boxes, err := l.Sandbox.List(ctx, map[string]string{"agentenv.instance": Instance})
	if err != nil {
		return nil, fmt.Errorf("listing sandboxes: %w", err)
	}
	ids := make([]string, len(boxes))
	for i, b := range boxes {
		ids[i] = b.ID
	}
	return ids, nil
}

// LocalEngine is an episode engine over the local process sandbox and the
// hermes tool-call format, both run in this process (the engine and the
// sandbox are the ones `agentenv serve` uses; only the plugin RPC is left
// out). stateDir holds the sandbox's state files ("" = its default).
func LocalEngine(ctx context.Context, b *bundle.Bundle, stateDir string, log hclog.Logger) (*Local, error) {
	sb := local.New()
	if log != nil {
		sb.SetLogger(log.Named("sandbox-local"))
	}
	if stateDir != "" {
		cfg, err := json.Marshal(map[string]string{"state_dir": stateDir})
		if err != nil {
			return nil, fmt.Errorf("configuring the local sandbox: %w", err)
		}
		if err := sb.Configure(ctx, cfg); err != nil {
			return nil, fmt.Errorf("configuring the local sandbox: %w", err)
		}
	}
	formats := func(name string) (toolformat.Parser, error) {
		if name != "hermes" {
			return nil, fmt.Errorf("only hermes is built into the baselines, not %q", name)
		}
		return hermes.New(), nil
	}
	e, err := episode.NewEngine(episode.Config{
		Bundle:            b,
		Sandbox:           sb,
		ToolFormat:        formats,
		DefaultToolFormat: "hermes",
		Labels:            map[string]string{"agentenv.instance": Instance},
		Logger:            log,
	})
	if err != nil {
		return nil, err
	}
	return &Local{Engine: e, Sandbox: sb}, nil
}
