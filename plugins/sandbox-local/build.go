package local

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/agentenv/agentenv/sdk/sandbox"
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
	if len(spec.Build) == 0 {
		return nil
	}
	cfg := p.config()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(cfg.BuildTimeout))
	defer cancel()
	argv := resolveCommand(spec.Dir, spec.Build)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	p.log.Info("building env", "env", spec.Env, "command", spec.Build, "dir", spec.Dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			// Wrapped so the SDK tells a build the caller cut short (tried
			// again) from one that ran out of build_timeout (not retried).
			err = fmt.Errorf("%w (build_timeout %s): %w", err, time.Duration(cfg.BuildTimeout), ctx.Err())
		}
		return fmt.Errorf("sandbox-local: building env %q (%q in %s): %w%s", spec.Env, spec.Build, spec.Dir, err, outputTail(out))
	}
	p.log.Info("built env", "env", spec.Env, "took", time.Since(start).String())
	return nil
}

// outputTail is the end of a command's output, for error messages.
func outputTail(out []byte) string {
	s := strings.TrimSpace(string(out))
	if s == "" {
		return ""
	}
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return "; output:\n" + s
}
