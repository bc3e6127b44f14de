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
	if err := processRefuses(spec); err != nil {
		return err
	}
	return p.runBuild(ctx, spec)
}

// buildTimeout bounds building spec's env: its own timeout (a Harbor
// task's build_timeout_sec), else the build_timeout setting.
func (p *Plugin) buildTimeout(spec sandbox.Spec) time.Duration {
	if spec.BuildTimeout > 0 {
		return spec.BuildTimeout
	}
	return time.Duration(p.config().BuildTimeout)
}

// runBuild runs the env's build command (env.toml `build`) in its folder,
// in a process group of its own, within its build timeout.
func (p *Plugin) runBuild(ctx context.Context, spec sandbox.Spec) error {
	if err := hostenv.Build(ctx, p.log, spec, p.buildTimeout(spec)); err != nil {
		return fmt.Errorf("sandbox-local: %w", err)
	}
	return nil
}
