// Package e2e runs the bwrap plugin the way its users do: as a binary on
// AGENTENV_PLUGIN_PATH under a real `agentenv serve`, played by a real
// client (`agentenv play`), and replaced while it serves; and it follows
// docs/writing-a-sandbox-plugin.md literally, from an empty folder.
package e2e

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/agentenv/agentenv/sdk/sdktest"
)

// repoRoot is the agentenv checkout holding this module.
var repoRoot, _ = filepath.Abs(filepath.Join("..", "..", ".."))

// needBwrap skips a test on a machine without bwrap, except in CI, where
// .ci/run installs it and its absence is a failure.
func needBwrap(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		sdktest.Missing(t, "bwrap", err.Error(), "apt-get install bubblewrap")
	}
}

// goBuild builds pkg (a directory of this checkout) to out.
func goBuild(t testing.TB, pkg, out string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", append(append([]string{"build", "-o", out}, args...), pkg)...)
	cmd.Dir = repoRoot
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}

// agentenvBin builds agentenv from this checkout, once per test run.
var agentenvBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "bwrap-e2e-agentenv-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "agentenv")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/agentenv")
	cmd.Dir = repoRoot
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/agentenv: %v\n%s", err, b)
	}
	return out, nil
})

func agentenv(t testing.TB) string {
	t.Helper()
	bin, err := agentenvBin()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := agentenvBin(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

// logBuffer collects a process's output for many readers.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitOutput waits until re matches out, and returns its submatches.
func waitOutput(t testing.TB, out *logBuffer, re *regexp.Regexp, within time.Duration, what string) []string {
	t.Helper()
	var m []string
	wait.For(t, what, func() error {
		text := out.String()
		if m = re.FindStringSubmatch(text); m == nil {
			return fmt.Errorf("not in the output:\n%s", text)
		}
		return nil
	}, wait.Timeout(within))
	return m
}

// process is a started command whose output is collected.
type process struct {
	cmd    *exec.Cmd
	out    *logBuffer
	stdin  io.WriteCloser
	exited chan struct{}
	err    error
}

// start runs name with args and env (added to this one's), in its own
// process group, which is killed when the test ends.
func start(t testing.TB, env []string, stdin bool, name string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(name, args...), out: &logBuffer{}, exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if stdin {
		var err error
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	})
	return p
}

// wait waits for the process to exit and returns its error.
func (p *process) wait(t testing.TB, within time.Duration) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(within):
		t.Fatalf("%s still running after %v; output:\n%s", p.cmd.Args[0], within, p.out)
		return nil
	}
}

// keepers lists the live keeper processes of sandboxes in stateDir.
func keepers(stateDir string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 3 && args[1] == "keep" && strings.HasPrefix(args[3], stateDir+"/") {
			stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && !bytes.HasPrefix(bytes.TrimSpace(stat[i+1:]), []byte("Z")) {
				out = append(out, e.Name())
			}
		}
	}
	return out
}
