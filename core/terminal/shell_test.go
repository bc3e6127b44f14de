package terminal

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestShell(t *testing.T) {
	e := newEnv(t, Options{MaxOutput: 1000})
	cases := []struct {
		name    string
		args    map[string]any
		want    string // the whole text, when set
		has     []string
		isError bool
	}{
		{name: "stdout", args: map[string]any{"command": "echo hello"},
			want: "exit code: 0\nstdout:\nhello\nstderr: (empty)\n"},
		{name: "stderr and exit code", args: map[string]any{"command": "echo oops >&2; exit 3"},
			want: "exit code: 3\nstdout: (empty)\nstderr:\noops\n"},
		{name: "no trailing newline", args: map[string]any{"command": "printf abc"},
			want: "exit code: 0\nstdout:\nabc\nstderr: (empty)\n"},
		{name: "runs in the workdir", args: map[string]any{"command": "pwd"},
			want: "exit code: 0\nstdout:\n" + e.workdir + "\nstderr: (empty)\n"},
		{name: "bash, not sh", args: map[string]any{"command": "echo ${BASH_VERSION:+bash}"},
			has: []string{"stdout:\nbash\n"}},
		{name: "stdin is empty", args: map[string]any{"command": "cat; echo done"},
			has: []string{"exit code: 0", "stdout:\ndone\n"}},
		{name: "killed by a signal", args: map[string]any{"command": "kill -9 $$"},
			has: []string{"exit code: 137 (killed by signal killed)"}},
		{name: "several lines", args: map[string]any{"command": "x=4\necho $((x*2))"},
			has: []string{"stdout:\n8\n"}},
		{name: "stdout cut", args: map[string]any{"command": "head -c 100000 /dev/zero | tr '\\0' a; echo; echo END"},
			has: []string{"stdout:\n" + strings.Repeat("a", 500) + "\n[... 99005 bytes cut ...]\n", "END\n"}},
		{name: "stderr cut separately", args: map[string]any{"command": "echo out; head -c 5000 /dev/zero | tr '\\0' e >&2"},
			has: []string{"stdout:\nout\n", "[... 4000 bytes cut ...]"}},
		{name: "empty command", args: map[string]any{"command": "  "},
			want: "command is empty: give the bash command to run", isError: true},
		{name: "timeout over the maximum", args: map[string]any{"command": "true", "timeout_sec": 5000},
			has: []string{"timeout_sec"}, isError: true},
		{name: "unknown argument", args: map[string]any{"cmd": "ls"},
			has: []string{`unexpected additional properties ["cmd"]`}, isError: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text, isErr := e.call(t, ToolShell, c.args)
			if isErr != c.isError {
				t.Fatalf("tool error = %v, want %v: %s", isErr, c.isError, text)
			}
			if c.want != "" && text != c.want {
				t.Errorf("got\n%q\nwant\n%q", text, c.want)
			}
			for _, h := range c.has {
				if !strings.Contains(text, h) {
					t.Errorf("got\n%q\nwant it to contain\n%q", text, h)
				}
			}
		})
	}
}

// A cut never splits a character.
func TestShellCutKeepsCharacters(t *testing.T) {
	e := newEnv(t, Options{MaxOutput: 102}) // 51 bytes each side: both cuts fall inside a 2-byte character
	text := e.shell(t, "for i in $(seq 300); do printf 'é'; done")
	if !strings.Contains(text, " bytes cut ...]") {
		t.Fatalf("no cut note in %q", text)
	}
	if !utf8Valid(text) {
		t.Errorf("the cut broke a character: %q", text)
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// At the timeout the whole process group dies: the command and what it
// started in the background.
func TestShellTimeoutKillsTheGroup(t *testing.T) {
	e := newEnv(t, Options{})
	start := time.Now()
	text, isErr := e.call(t, ToolShell, map[string]any{
		"command":     "sleep 300 & echo $! > bg.pid; echo started; sleep 300",
		"timeout_sec": 1,
	})
	if isErr {
		t.Fatalf("tool error: %s", text)
	}
	if !strings.HasPrefix(text, "timed out after 1s: the command and every process it started were killed\n") ||
		!strings.Contains(text, "stdout:\nstarted\n") {
		t.Errorf("got %q", text)
	}
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("the call took %v", d)
	}
	waitGone(t, pidFrom(t, filepath.Join(e.workdir, "bg.pid")))
}

// A server started in the background with its output redirected outlives
// the call; one that keeps the pipes open does not hold the call up.
func TestShellBackground(t *testing.T) {
	e := newEnv(t, Options{})
	text := e.shell(t, "nohup sleep 300 > /dev/null 2>&1 & echo $! > server.pid; echo ok")
	if !strings.Contains(text, "stdout:\nok\n") || strings.Contains(text, "note:") {
		t.Errorf("got %q", text)
	}
	pid := pidFrom(t, filepath.Join(e.workdir, "server.pid"))
	if !alive(pid) {
		t.Errorf("the background server %d died with the call", pid)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	waitGone(t, pid)

	text = e.shell(t, "sleep 300 & echo $! > held.pid; echo ok")
	if !strings.Contains(text, "stdout:\nok\n") || !strings.Contains(text, "note: background processes still hold stdout/stderr") {
		t.Errorf("got %q", text)
	}
	pid = pidFrom(t, filepath.Join(e.workdir, "held.pid"))
	_ = syscall.Kill(pid, syscall.SIGKILL)
	waitGone(t, pid)
}

// A call the client cancels stops its command.
func TestShellCancelKillsTheCommand(t *testing.T) {
	e := newEnv(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = e.session.CallTool(ctx, callParams(ToolShell, map[string]any{"command": "echo $$ > cmd.pid; sleep 300"}))
	}()
	pid := pidFrom(t, filepath.Join(e.workdir, "cmd.pid"))
	cancel()
	<-done
	waitGone(t, pid)
}

// Calls run side by side, each with its own output.
func TestShellConcurrent(t *testing.T) {
	e := newEnv(t, Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text, isErr := e.call(t, ToolShell, map[string]any{"command": fmt.Sprintf("sleep 0.5; echo call-%d", i)})
			if want := fmt.Sprintf("stdout:\ncall-%d\n", i); isErr || !strings.Contains(text, want) {
				errs <- fmt.Errorf("call %d: got %q", i, text)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// The result format a model reads, as docs/harbor-tools.md shows it.
func TestShellResultFormat(t *testing.T) {
	e := newEnv(t, Options{})
	text := e.shell(t, "echo a; echo b >&2; exit 1")
	if !regexp.MustCompile(`^exit code: 1\nstdout:\na\nstderr:\nb\n$`).MatchString(text) {
		t.Errorf("got %q", text)
	}
}
