//go:build unix

package hostenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

// Build runs spec's build command (env.toml `build`) on the host in the
// env's folder, in a process group of its own that is killed whole when
// ctx ends or timeout passes; a plugin's Prepare calls it. No build command
// is no work. A failure names the command and ends with its output's tail.
func Build(ctx context.Context, log hclog.Logger, spec sandbox.Spec, timeout time.Duration) error {
	if len(spec.Build) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	argv := ResolveCommand(spec.Dir, spec.Build)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	log.Info("building env", "env", spec.Env, "command", spec.Build, "dir", spec.Dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			// Wrapped so the SDK tells a build the caller cut short (tried
			// again) from one that ran out of build_timeout (not retried).
			err = fmt.Errorf("%w (build_timeout %s): %w", err, timeout, ctx.Err())
		}
		return fmt.Errorf("building env %q (%q in %s): %w%s", spec.Env, spec.Build, spec.Dir, err, OutputTail(string(out)))
	}
	log.Info("built env", "env", spec.Env, "took", time.Since(start).String())
	return nil
}

// ResolveCommand makes a relative program path (one with a slash) relative
// to the env's folder dir; a bare name is left to be looked up on PATH.
func ResolveCommand(dir string, argv []string) []string {
	out := append([]string(nil), argv...)
	if strings.Contains(out[0], "/") && !filepath.IsAbs(out[0]) && dir != "" {
		out[0] = filepath.Join(dir, out[0])
	}
	return out
}

// outputTailMax bounds how much of a command's output an error quotes.
const outputTailMax = 2000

// OutputTail is the end of a command's output for an error message:
// "; its output ends:\n" and its last 2000 bytes, or "" for no output.
func OutputTail(out string) string {
	out = strings.TrimSpace(out)
	if out == "" {
		return ""
	}
	if len(out) > outputTailMax {
		out = "..." + out[len(out)-outputTailMax:]
	}
	return "; its output ends:\n" + out
}

// FileTail is the last n bytes of the file at path (an env's log), from a
// line start and trimmed; "" if it cannot be read.
func FileTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(info.Size()-n, 0)
	data, err := io.ReadAll(io.NewSectionReader(f, off, info.Size()-off))
	if err != nil {
		return ""
	}
	if off > 0 {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return strings.TrimSpace(string(data))
}
