package local

import (
	"context"
	"fmt"
	"time"

	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sandbox/hostenv"
)

var _ sandbox.Preparer = (*Plugin)(nil)

// Prepare makes an env ready to deploy; the SDK runs it once per env per
// plugin process, before the env's first deploy. In Docker mode it builds
// the env's image when the tag is missing (prepareDocker); in process mode
// it runs the env's build command.
func (p *Plugin) Prepare(ctx context.Context, spec sandbox.Spec) error {
	mode, err := p.envMode(ctx, spec)
	if err != nil {
		return err
	}
	if mode == ModeDocker {
		return p.prepareDocker(ctx, spec)
	}
	return p.runBuild(ctx, spec)
}

// runBuild runs the env's build command (env.toml `build`) in its folder,
// in a process group of its own, within build_timeout.
func (p *Plugin) runBuild(ctx context.Context, spec sandbox.Spec) error {
	if err := hostenv.Build(ctx, p.log, spec, time.Duration(p.config().BuildTimeout)); err != nil {
		return fmt.Errorf("sandbox-local: %w", err)
	}
	return nil
}
