package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/internal/servetest"
	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds the command as `make build` does: static, stripped.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agentenv-terminal-test-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "agentenv-terminal")
		buildErr = servetest.BuildStatic("", ".", binPath, "-ldflags=-s -w")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// The binary runs in images with no libc: it must be a static ELF, which
// is what sandboxes check before injecting it.
func TestBinaryIsStatic(t *testing.T) {
	bin := binary(t)
	if err := sandbox.CheckTerminalBinary(bin); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("agentenv-terminal: %.1f MB", float64(fi.Size())/(1<<20))
}

// The binary links the standard library, the MCP SDK (and what it
// needs) and core/terminal; nothing else of ours or anyone's.
func TestDependencies(t *testing.T) {
	deps := func(pkg string) map[string]bool {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		set := map[string]bool{}
		for _, l := range strings.Fields(string(out)) {
			set[l] = true
		}
		return set
	}
	allowed := deps("github.com/modelcontextprotocol/go-sdk/mcp")
	for _, ours := range []string{"github.com/agentenv/agentenv/cmd/agentenv-terminal", "github.com/agentenv/agentenv/core/terminal", "github.com/agentenv/agentenv/core/tempfile"} {
		allowed[ours] = true
	}
	var extra []string
	for d := range deps("github.com/agentenv/agentenv/cmd/agentenv-terminal") {
		if !allowed[d] {
			extra = append(extra, d)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("agentenv-terminal depends on more than the MCP SDK: %v", extra)
	}
}

// proc is the binary running as a subprocess.
type proc struct {
	cmd     *exec.Cmd
	url     string
	workdir string
	logs    string
	stderr  *lockedBuffer
	exited  chan error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// start runs the binary on a free loopback port with a temp workdir, as a
// sandbox does (AGENTENV_PORT, AGENTENV_WORKDIR), and waits until it says
// it serves.
func start(t *testing.T) *proc {
	t.Helper()
	root := t.TempDir()
	p := &proc{workdir: filepath.Join(root, "work"), logs: filepath.Join(root, "logs"), stderr: &lockedBuffer{}, exited: make(chan error, 1)}
	port := freePort(t)
	p.cmd = exec.Command(binary(t), "--host", "127.0.0.1", "--verifier-logs", p.logs)
	p.cmd.Env = append(os.Environ(), "AGENTENV_PORT="+strconv.Itoa(port), "AGENTENV_WORKDIR="+p.workdir)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	serving := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			fmt.Fprintln(p.stderr, sc.Text())
			if strings.Contains(sc.Text(), "serving MCP") {
				once.Do(func() { close(serving) })
			}
		}
		p.exited <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	select {
	case <-serving:
	case err := <-p.exited:
		t.Fatalf("agentenv-terminal exited before serving: %v\n%s", err, p.stderr)
	case <-time.After(60 * time.Second):
		t.Fatalf("agentenv-terminal did not serve within a minute:\n%s", p.stderr)
	}
	p.url = fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	return p
}

func (p *proc) connect(t *testing.T) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	s, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: p.url}, nil)
	if err != nil {
		t.Fatalf("connecting to %s: %v", p.url, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func shell(t *testing.T, s *mcp.ClientSession, args map[string]any) string {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "shell", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError {
		t.Fatalf("shell %v: %s", args, text)
	}
	return text
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	var b []byte
	wait.For(t, path+" to be written", func() error {
		var err error
		if b, err = os.ReadFile(path); err == nil && !strings.HasSuffix(string(b), "\n") {
			err = fmt.Errorf("%q has no line end yet", b)
		}
		return err
	})
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// parentOf is pid's parent process, or 0 when it has gone.
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// waitGone waits until pid is no process at all, not even a zombie.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	wait.For(t, fmt.Sprintf("process %d to be gone", pid), func() error {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return nil
		}
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return fmt.Errorf("still there: %s", stat)
	})
}

// Served as a sandbox runs it: the tools are listed, commands run in
// AGENTENV_WORKDIR.
func TestServes(t *testing.T) {
	p := start(t)
	s := p.connect(t)
	tools, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "editor,run_tests,shell" {
		t.Errorf("tools %v, want editor, run_tests, shell", names)
	}
	if got := shell(t, s, map[string]any{"command": "pwd"}); !strings.Contains(got, "stdout:\n"+p.workdir+"\n") {
		t.Errorf("pwd: %q, want %s", got, p.workdir)
	}
}

// Processes a command leaves behind become the server's children when
// their parent exits; they are reaped when they die, so none stays a
// zombie, and at a timeout they are killed with the command.
func TestNoZombieOrOrphan(t *testing.T) {
	p := start(t)
	s := p.connect(t)
	// The subshell exits at once, orphaning sleep, which the server
	// adopts (it is a subreaper, as PID 1 is) and reaps once it exits.
	shell(t, s, map[string]any{"command": "(sleep 2 & echo $! > orphan.pid)"})
	orphan := readPid(t, filepath.Join(p.workdir, "orphan.pid"))
	if ppid := parentOf(orphan); ppid != p.cmd.Process.Pid {
		t.Errorf("the orphan's parent is %d, not the server %d", ppid, p.cmd.Process.Pid)
	}
	waitGone(t, orphan)

	got := shell(t, s, map[string]any{"command": "(sleep 300 & echo $! > bg.pid); sleep 300", "timeout_sec": 1})
	if !strings.HasPrefix(got, "timed out after 1s") {
		t.Errorf("got %q", got)
	}
	waitGone(t, readPid(t, filepath.Join(p.workdir, "bg.pid")))
}

// SIGTERM stops the server and every command still running.
func TestSigtermKillsCommands(t *testing.T) {
	p := start(t)
	s := p.connect(t)
	go func() {
		_, _ = s.CallTool(context.Background(), &mcp.CallToolParams{Name: "shell", Arguments: map[string]any{"command": "echo $$ > long.pid; sleep 300"}})
	}()
	pid := readPid(t, filepath.Join(p.workdir, "long.pid"))
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		p.exited <- err // for the cleanup
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, p.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30 s after SIGTERM:\n%s", p.stderr)
	}
	waitGone(t, pid)
}

// Start-up errors name what is wrong and exit 1.
func TestStartErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"port not a number", []string{"AGENTENV_PORT=http"}, nil, `AGENTENV_PORT="http" is not a port number (1-65535)`},
		{"port in use", []string{"AGENTENV_PORT=" + busyPort}, []string{"--host", "127.0.0.1"}, "listening on 127.0.0.1:" + busyPort},
		{"unknown flag", nil, []string{"--shell", "zsh"}, "flag provided but not defined: -shell"},
		{"stray argument", nil, []string{"serve"}, `unexpected arguments ["serve"]`},
		{"workdir not makeable", []string{"AGENTENV_WORKDIR=/proc/no/such"}, []string{"--host", "127.0.0.1", "--port", "1"}, "terminal: making workdir"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(binary(t), c.args...)
			cmd.Env = append(os.Environ(), c.env...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Fatalf("exit %v, want a failure; output:\n%s", err, out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Errorf("output lacks %q:\n%s", c.want, out)
			}
		})
	}
}
