package envclient_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/envclient"
	"github.com/agentenv/agentenv/core/testenv/testenvbuild"
)

var testenvBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "envclient-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testenvBin, err = testenvbuild.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if left := testenvbuild.Procs(testenvBin); len(left) > 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "testenv processes left behind: %v\n", left)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
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

// startEnv runs the testenv with extra environment and returns its base URL.
func startEnv(t *testing.T, env ...string) string {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(testenvBin)
	cmd.Dir = t.TempDir()
	cmd.Env = append([]string{"AGENTENV_PORT=" + strconv.Itoa(port), "PATH=" + os.Getenv("PATH")}, env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

func connect(t *testing.T, endpoint string, within time.Duration) *envclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	c, err := envclient.Connect(ctx, endpoint, envclient.Options{})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestListToolsPaginates(t *testing.T) {
	for _, pageSize := range []string{"", "1", "3"} {
		t.Run("page="+pageSize, func(t *testing.T) {
			c := connect(t, startEnv(t, "TESTENV_PAGE_SIZE="+pageSize), 10*time.Second)
			tools, err := c.ListTools(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tools {
				names = append(names, tool.Name)
				if !strings.Contains(string(tool.Parameters), `"object"`) {
					t.Errorf("tool %s: input schema %s is not an object schema", tool.Name, tool.Parameters)
				}
			}
			got := strings.Join(names, ",")
			want := "add,crash,echo,flood,grade,guess,load_puzzle,sleep,write_note"
			if got != want {
				t.Fatalf("tools = %s, want %s", got, want)
			}
		})
	}
}

func TestCallTool(t *testing.T) {
	c := connect(t, startEnv(t), 10*time.Second)
	ctx := context.Background()
	tests := []struct {
		name, tool, args string
		want             string
		wantIsError      bool
	}{
		{"before setup is a tool error", "add", `{"n":1}`, "no puzzle loaded", true},
		{"setup", "load_puzzle", `{"target":5,"start":2}`, "puzzle loaded: start at 2", false},
		{"play", "add", `{"n":3}`, "5", false},
		{"grade", "grade", ``, "1", false},
		{"empty args object", "grade", `{}`, "1", false},
		{"unknown tool", "nope", `{}`, "unknown tool", true},
		{"bad args caught by the server", "add", `{"n":"x"}`, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := c.CallTool(ctx, tc.tool, []byte(tc.args), 5*time.Second)
			if tc.tool == "nope" && err != nil {
				// Servers may answer an unknown tool with a protocol error instead.
				if !strings.Contains(err.Error(), "nope") {
					t.Fatalf("unknown tool error %v does not name the tool", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError != tc.wantIsError || !strings.Contains(res.Text, tc.want) {
				t.Fatalf("got %+v, want text containing %q, isError %v", res, tc.want, tc.wantIsError)
			}
		})
	}
}

func TestCallToolRejectsNonObjectArguments(t *testing.T) {
	c := connect(t, startEnv(t), 10*time.Second)
	_, err := c.CallTool(context.Background(), "add", []byte(`[1]`), time.Second)
	if err == nil || !strings.Contains(err.Error(), "not a JSON object") {
		t.Fatalf("err = %v, want a not-an-object error", err)
	}
}

func TestCallToolDeadline(t *testing.T) {
	c := connect(t, startEnv(t), 10*time.Second)
	start := time.Now()
	_, err := c.CallTool(context.Background(), "sleep", []byte(`{"seconds":30}`), 300*time.Millisecond)
	if !errors.Is(err, envclient.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if !strings.Contains(err.Error(), "sleep") || !strings.Contains(err.Error(), "300ms") {
		t.Fatalf("error %q should name the tool and the deadline", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("deadline not honoured: took %s", time.Since(start))
	}
}

func TestCallToolAfterCrash(t *testing.T) {
	c := connect(t, startEnv(t), 10*time.Second)
	_, err := c.CallTool(context.Background(), "crash", nil, 5*time.Second)
	if err == nil {
		t.Fatal("crash answered normally")
	}
	_, err = c.CallTool(context.Background(), "echo", []byte(`{"text":"hi"}`), 5*time.Second)
	if err == nil {
		t.Fatal("a call to a dead env succeeded")
	}
}

func TestConnectWaitsForSlowStart(t *testing.T) {
	c := connect(t, startEnv(t, "TESTENV_START_DELAY=700ms"), 15*time.Second)
	res, err := c.CallTool(context.Background(), "echo", []byte(`{"text":"up"}`), 5*time.Second)
	if err != nil || res.Text != "up" {
		t.Fatalf("echo = %+v, %v", res, err)
	}
}

func TestConnectDeadline(t *testing.T) {
	tests := []struct {
		name     string
		endpoint func(t *testing.T) string
	}{
		{"nothing listening", func(t *testing.T) string { return fmt.Sprintf("http://127.0.0.1:%d", freePort(t)) }},
		{"env that exits", func(t *testing.T) string { return startEnv(t, "TESTENV_FAIL_START=1") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := envclient.Connect(ctx, tc.endpoint(t), envclient.Options{})
			if err == nil {
				t.Fatal("connected to nothing")
			}
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not ready") {
				t.Fatalf("err = %v, want a not-ready deadline error", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("Connect overran its deadline: %s", d)
			}
		})
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	c := connect(t, startEnv(t), 10*time.Second)
	_ = c.Close()
	_ = c.Close()
	if _, err := c.CallTool(context.Background(), "echo", []byte(`{"text":"x"}`), time.Second); err == nil {
		t.Fatal("call after Close succeeded")
	}
}

func TestPing(t *testing.T) {
	c := connect(t, startEnv(t), 10*time.Second)
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("Ping of a live env: %v", err)
	}
	_, _ = c.CallTool(context.Background(), "crash", nil, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx); err == nil || !strings.Contains(err.Error(), "pinging") {
		t.Fatalf("Ping of a crashed env = %v, want an error", err)
	}
}
