package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"time"

	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sandbox/hostenv"
)

// execOutputMax bounds each of a command's stdout and stderr.
const execOutputMax = 1 << 20

// Exec runs cmd in a sandbox of its own laid out as the env's: the same
// work folder and /tmp, the env's environment and network setting, but its
// own PID namespace, so whatever the command leaves running dies with it.
// Its bwrap dies with this plugin process (--die-with-parent).
func (p *plugin) Exec(ctx context.Context, sb sandbox.Sandbox, cmd []string) (sandbox.ExecResult, error) {
	cfg := p.config()
	st, err := readState(cfg.StateDir, sb.ID)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	fail := func(err error) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{}, fmt.Errorf("%s: exec %q in %s: %w", pluginID, cmd, sb.ID, err)
	}
	if len(cmd) == 0 || cmd[0] == "" {
		return fail(errors.New("empty command"))
	}
	if !st.alive() {
		return fail(fmt.Errorf("the sandbox has stopped: %w", sandbox.ErrNotFound))
	}
	bwrap, err := exec.LookPath(cfg.Bwrap)
	if err != nil {
		return fail(err)
	}
	box, err := st.Layout.bwrapArgs(false, p.exe)
	if err != nil {
		return fail(err)
	}
	argv := []string{bwrap}
	if lim := st.Layout.Limits.limitArgs(); len(lim) > 0 {
		argv = append(append(append([]string{p.exe, "limit"}, lim...), "--"), bwrap)
	}
	argv = append(append(argv, box...), hostenv.ResolveCommand(st.Layout.EnvDir, cmd)...)

	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Env = st.Environ
	stdout, stderr := hostenv.NewCappedBuffer(execOutputMax), hostenv.NewCappedBuffer(execOutputMax)
	c.Stdout, c.Stderr = stdout, stderr
	// Killing bwrap kills its sandbox (--die-with-parent inside it); the
	// output pipes then close, since nothing in the sandbox is left.
	c.WaitDelay = time.Second
	err = runLocked(c)
	res := sandbox.ExecResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("%s: exec %q in %s: %w", pluginID, cmd, sb.ID, ctx.Err())
	case err != nil && !errors.As(err, &exit):
		return res, fmt.Errorf("%s: exec %q in %s: %w", pluginID, cmd, sb.ID, err)
	}
	res.ExitCode = exitStatus(err)
	return res, nil
}

// runLocked runs c from a thread that lives until c has exited: bwrap's
// --die-with-parent fires when the thread that started it ends.
func runLocked(c *exec.Cmd) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		done <- c.Run()
	}()
	return <-done
}
