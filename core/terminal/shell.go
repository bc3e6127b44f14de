package terminal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Shell timeouts, in seconds.
const (
	DefaultShellTimeout = 120
	MaxShellTimeout     = 1800
)

type shellIn struct {
	Command    string `json:"command"`
	TimeoutSec int    `json:"timeout_sec,omitempty"`
}

// defaultPath is PATH for commands when the container sets none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func (s *Server) shell(ctx context.Context, in shellIn) (string, error) {
	if strings.TrimSpace(in.Command) == "" {
		return "", errors.New("command is empty: give the bash command to run")
	}
	timeout := in.TimeoutSec
	if timeout == 0 {
		timeout = DefaultShellTimeout
	}
	if timeout < 1 || timeout > MaxShellTimeout {
		return "", fmt.Errorf("timeout_sec %d is out of range: give 1 to %d seconds", in.TimeoutSec, MaxShellTimeout)
	}
	sh, err := findShell()
	if err != nil {
		return "", err
	}
	stdout, stderr := newBoundedBuffer(s.opts.MaxOutput), newBoundedBuffer(s.opts.MaxOutput)
	start := time.Now()
	out, err := s.run(ctx, job{
		args: []string{sh, "-c", in.Command}, dir: s.opts.Workdir, env: commandEnv(nil),
		timeout: time.Duration(timeout) * time.Second, stdout: stdout, stderr: stderr,
		keepBackground: true,
	})
	if err != nil {
		return "", fmt.Errorf("starting %s: %w", sh, err)
	}
	stdout.freeze()
	stderr.freeze()
	s.opts.Logger.Info("shell", "exit_code", out.exitCode, "timed_out", out.timedOut,
		"cancelled", out.cancelled, "duration", time.Since(start).Round(time.Millisecond))
	if out.cancelled {
		return "", fmt.Errorf("the call was cancelled: the command and its processes were killed")
	}
	return shellResult(out, timeout, stdout, stderr), nil
}

// shellResult is the text the model reads.
func shellResult(out outcome, timeout int, stdout, stderr *boundedBuffer) string {
	var b strings.Builder
	switch {
	case out.timedOut:
		fmt.Fprintf(&b, "timed out after %ds: the command and every process it started were killed\n", timeout)
	case out.signal != 0:
		fmt.Fprintf(&b, "exit code: %d (killed by signal %s)\n", out.exitCode, out.signal)
	default:
		fmt.Fprintf(&b, "exit code: %d\n", out.exitCode)
	}
	section := func(name string, buf *boundedBuffer) {
		text, _ := buf.text()
		if text == "" {
			fmt.Fprintf(&b, "%s: (empty)\n", name)
			return
		}
		fmt.Fprintf(&b, "%s:\n%s", name, text)
		if !strings.HasSuffix(text, "\n") {
			b.WriteString("\n")
		}
	}
	section("stdout", stdout)
	section("stderr", stderr)
	if out.pipesOpen {
		b.WriteString("note: background processes still hold stdout/stderr; their later output is not shown (redirect it to a file)\n")
	}
	return b.String()
}

// findShell is bash, or sh in an image without bash.
func findShell() (string, error) {
	for _, name := range []string{"bash", "/bin/bash", "/usr/bin/bash", "sh", "/bin/sh"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no shell: the environment has neither bash nor sh")
}

// commandEnv is this process's environment (the container's), with a PATH
// when it has none, plus extra.
func commandEnv(extra map[string]string) []string {
	env := os.Environ()
	if os.Getenv("PATH") == "" {
		env = append(env, "PATH="+defaultPath)
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}
