package terminal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMain makes the test process the reaper of what the commands leave
// behind, as the binary is in its container, so a test can wait for a
// killed background process to vanish rather than stay a zombie of init.
// Every child of this test process is started by the package (tests make
// their archives in Go, not with tar).
func TestMain(m *testing.M) {
	ctx, cancel := context.WithCancel(context.Background())
	go ReapOrphans(ctx, slog.New(slog.DiscardHandler))
	code := m.Run()
	cancel()
	os.Exit(code)
}

// env is a terminal server under test: served over real HTTP, called
// with the MCP SDK's client.
type env struct {
	srv     *Server
	workdir string
	logs    string
	session *mcp.ClientSession
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	root := t.TempDir()
	if opts.Workdir == "" {
		opts.Workdir = filepath.Join(root, "work")
	}
	if opts.VerifierLogs == "" {
		opts.VerifierLogs = filepath.Join(root, "logs", "verifier")
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	session, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: hs.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = session.Close()
		srv.Close()
		hs.Close()
	})
	return &env{srv: srv, workdir: srv.Workdir(), logs: opts.VerifierLogs, session: session}
}

// call calls a tool and returns its text and whether it is a tool error.
func (e *env) call(t *testing.T, tool string, args any) (string, bool) {
	t.Helper()
	return e.callCtx(context.Background(), t, tool, args)
}

func (e *env) callCtx(ctx context.Context, t *testing.T, tool string, args any) (string, bool) {
	t.Helper()
	res, err := e.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: %v", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			t.Fatalf("%s answered %T, want text", tool, c)
		}
		b.WriteString(tc.Text)
	}
	return b.String(), res.IsError
}

func callParams(tool string, args any) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: tool, Arguments: args}
}

func (e *env) shell(t *testing.T, command string) string {
	t.Helper()
	text, isErr := e.call(t, ToolShell, map[string]any{"command": command})
	if isErr {
		t.Fatalf("shell %q: tool error: %s", command, text)
	}
	return text
}

func (e *env) file(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.workdir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (e *env) write(t *testing.T, name, text string) {
	t.Helper()
	p := filepath.Join(e.workdir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitFile waits for a file to appear with content, and returns it.
func waitFile(t *testing.T, p string) string {
	t.Helper()
	var text string
	wait.For(t, p+" to be written", func() error {
		b, err := os.ReadFile(p)
		if err == nil && !strings.HasSuffix(string(b), "\n") {
			err = fmt.Errorf("%q has no line end yet", b)
		}
		text = strings.TrimSpace(string(b))
		return err
	})
	return text
}

// pidFrom reads a pid a command wrote.
func pidFrom(t *testing.T, p string) int {
	t.Helper()
	pid, err := strconv.Atoi(waitFile(t, p))
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return pid
}

// alive reports whether pid is a process that has not exited (a zombie
// has exited).
func alive(pid int) bool {
	state, _, ok := procStat(pid)
	return ok && state != 'Z' && state != 'X'
}

// waitGone waits until pid is no process at all: killed and reaped.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	wait.For(t, fmt.Sprintf("process %d to be gone", pid), func() error {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return nil
		}
		state, ppid, _ := procStat(pid)
		return fmt.Errorf("still there (state %c, parent %d)", state, ppid)
	})
}

// decodeResult decodes run_tests's JSON result.
func decodeResult(t *testing.T, text string) TestsResult {
	t.Helper()
	var r TestsResult
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		t.Fatalf("run_tests result %q: %v", text, err)
	}
	return r
}
