package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentenv/agentenv/sdk/sdktest"
)

// harborBase is the image Harbor test tasks start FROM (scripts/harbor-base-image.sh).
const harborBase = "agentenv/harbor-base:bookworm"

// The binary as a sandbox runs it: bind-mounted read-only into an image
// that knows nothing of it, as the container's entrypoint and so PID 1,
// with the task's real /tests and /logs/verifier.
func TestInContainer(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		sdktest.Missing(t, "the docker CLI", err.Error(), "apt-get install docker.io")
	}
	if out, err := exec.Command("docker", "image", "inspect", "-f", "{{.Id}}", harborBase).CombinedOutput(); err != nil {
		sdktest.Missing(t, "the image "+harborBase, strings.TrimSpace(string(out)), "bash scripts/harbor-base-image.sh (with a Docker engine running)")
	}
	bin := binary(t)
	port := freePort(t)
	// Host networking: the test reaches the server on loopback with no
	// bridge or published port (the Docker sandbox's business, not this
	// binary's); the container still has its own PID namespace.
	out, err := exec.Command("docker", "run", "-d", "--network", "host", "--label", "agentenv.test=terminal",
		"-v", bin+":/.agentenv/agentenv-terminal:ro", "--entrypoint", "/.agentenv/agentenv-terminal",
		"-e", "AGENTENV_PORT="+strconv.Itoa(port), "-e", "AGENTENV_WORKDIR=/app",
		harborBase, "--host", "127.0.0.1").CombinedOutput()
	if err != nil {
		t.Fatalf("docker run: %v\n%s", err, out)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", id).Run() })

	s := connectRetrying(t, "http://127.0.0.1:"+strconv.Itoa(port)+"/mcp", id)
	call := func(tool string, args map[string]any) string {
		t.Helper()
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if res.IsError {
			t.Fatalf("%s %v: tool error: %s", tool, args, text)
		}
		return text
	}

	if got := call("shell", map[string]any{"command": "pwd; cat /proc/1/comm"}); !strings.Contains(got, "stdout:\n/app\nagentenv-termin\n") {
		t.Errorf("not PID 1 in /app: %q", got)
	}
	call("editor", map[string]any{"command": "create", "path": "greet.py", "file_text": "print('hello')\n"})
	if got := call("shell", map[string]any{"command": "python3 greet.py"}); !strings.Contains(got, "stdout:\nhello\n") {
		t.Errorf("python3 greet.py: %q", got)
	}
	// An orphan is re-parented to PID 1, the server, which reaps it: it
	// does not stay a zombie.
	call("shell", map[string]any{"command": "(sleep 1 & echo $! > /tmp/orphan.pid)"})
	got := call("shell", map[string]any{"command": `pid=$(cat /tmp/orphan.pid)
for i in $(seq 300); do kill -0 $pid 2>/dev/null || { echo gone; exit 0; }; sleep 0.1; done
cat /proc/$pid/stat; exit 1`})
	if !strings.Contains(got, "stdout:\ngone\n") {
		t.Errorf("the orphan was not reaped: %q", got)
	}

	// The verifier, Harbor's way: pytest over the agent's work, the reward
	// in /logs/verifier/reward.txt.
	tests := tgzOf(t, map[string]string{
		"test.sh": "mkdir -p /logs/verifier\ncd /app && python3 -m pytest -q /tests/test_greet.py && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
		"test_greet.py": "import subprocess\n\ndef test_greet():\n" +
			"    assert subprocess.run(['python3', '/app/greet.py'], capture_output=True, text=True).stdout == 'hello\\n'\n",
	})
	var verdict struct {
		Scores   map[string]float64 `json:"scores"`
		ExitCode int                `json:"exit_code"`
		Output   string             `json:"output_tail"`
	}
	text := call("run_tests", map[string]any{"files_tgz_b64": tests, "timeout_sec": 120})
	if err := json.Unmarshal([]byte(text), &verdict); err != nil {
		t.Fatalf("run_tests: %q: %v", text, err)
	}
	if verdict.Scores["reward"] != 1 || len(verdict.Scores) != 1 || !strings.Contains(verdict.Output, "1 passed") {
		t.Errorf("run_tests: %+v", verdict)
	}

	// docker stop sends SIGTERM to PID 1: the server handles it and exits
	// 0, rather than being killed when docker's grace runs out (137).
	if out, err := exec.Command("docker", "stop", "-t", "60", id).CombinedOutput(); err != nil {
		t.Fatalf("docker stop: %v\n%s", err, out)
	}
	out, err = exec.Command("docker", "inspect", "-f", "{{.State.ExitCode}}", id).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "0" {
		logs, _ := exec.Command("docker", "logs", id).CombinedOutput()
		t.Errorf("exit code after SIGTERM: %s (%v)\n%s", out, err, logs)
	}
}

// connectRetrying connects once the server in container id listens.
func connectRetrying(t *testing.T, url, id string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command("docker", "logs", id).CombinedOutput()
			t.Logf("container %s's log:\n%s", id, logs)
		}
	})
	var s *mcp.ClientSession
	wait.For(t, "an MCP server at "+url, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		s, err = client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
		return err
	}, wait.Every(100*time.Millisecond))
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// tgzOf is files as a base64 gzip tar, as run_tests takes them.
func tgzOf(t *testing.T, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}
