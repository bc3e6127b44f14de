package bench

// The echo half of BenchmarkOpenEnvEpisodes: OpenEnv's own envs/echo_env
// (an MCPEnvironment: every step goes through a FastMCP client and server
// inside OpenEnv's process) against an agentenv bundle whose env does the
// same echo work over MCP out of process (core/testenv's echo tool).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentenv/agentenv/client"
	"github.com/agentenv/agentenv/core/testenv/testenvbuild"
)

// echoText is what both echo episodes send and expect back.
const echoText = "The schedule is submitted."

// echoReply is the agentenv episode's one tool call, in hermes form.
var echoReply = fmt.Sprintf(`<tool_call>{"name": "echo", "arguments": {"text": %q}}</tool_call>`, echoText)

// serveEchoBundle serves a one-task bundle over core/testenv (built once
// per run into dir): deploy the env, offer its echo tool, score with the
// same tool (echo "1" reads as reward 1). reuse > 0 writes reuse = N in
// env.toml.
func serveEchoBundle(b *testing.B, testenv string, reuse int) *process {
	b.Helper()
	toml := fmt.Sprintf("command = [%q]\n", testenv)
	if reuse > 0 {
		toml += fmt.Sprintf("reuse = %d\n", reuse)
	}
	dir := b.TempDir()
	files := map[string]string{
		"README.md":          "An env that echoes (BenchmarkOpenEnvEpisodes).\n",
		"envs/echo/env.toml": toml,
		"tasks/echo.json": `[
  {"id": "env", "type": "deploy_env", "env": "echo"},
  {"id": "play", "type": "prompt_agent", "prompt": "Echo a line with the echo tool, then reply without a tool call.", "tools": ["echo"]},
  {"id": "grade", "type": "verify_tool", "tool": "echo", "arguments": {"text": "1"}}
]
`,
	}
	for path, content := range files {
		full := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	agentenv, _ := binaries(b)
	addr := freePort(b)
	return start(b, addr, "/health", agentenv, "serve", dir, "--addr", addr, "--log-level", "warn",
		"--sandbox-config", "state_dir="+b.TempDir(), "--sandbox-config", "mode=process")
}

// buildTestenv builds core/testenv once for the echo bundles.
func buildTestenv(b *testing.B) string {
	b.Helper()
	bin, err := testenvbuild.Build(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	return bin
}

// playEchoEpisode plays one echo episode on s: reset, one reply calling
// echo (its tool message must carry the text back), the final reply, which
// must end the episode with reward 1.
func playEchoEpisode(ctx context.Context, s *client.Session) error {
	if _, err := s.Reset(ctx, client.ResetRequest{TaskID: "echo"}); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	res, err := s.Step(ctx, echoReply)
	if err != nil {
		return fmt.Errorf("step: %w", err)
	}
	if m := res.Observation.Messages; len(m) != 1 || m[0].Role != "tool" || m[0].Content != echoText {
		return fmt.Errorf("the echo step did not answer with the text: %+v", res.Observation.Messages)
	}
	res, err = s.Step(ctx, "Done.")
	if err != nil {
		return fmt.Errorf("final reply: %w", err)
	}
	if !res.Done || res.Reward == nil || *res.Reward != 1 {
		return fmt.Errorf("the final reply did not end the episode with reward 1: %+v", res)
	}
	return nil
}

// serveOpenEnvEcho runs OpenEnv's own envs/echo_env as its app.py makes
// it (create_app with EchoEnvironment, CallToolAction,
// CallToolObservation), under uvicorn as `uvicorn server.app:app` loads it;
// extra are more KEY=value variables for it.
func serveOpenEnvEcho(b *testing.B, env map[string]string, extra ...string) *process {
	b.Helper()
	dir := env["ECHO_ENV_DIR"]
	if dir == "" {
		b.Fatalf("%s has no ECHO_ENV_DIR: run bench/openenv/setup.sh again", filepath.Join(openenvCache(), "env"))
	}
	addr := freePort(b)
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(env["PYTHON"], "-m", "uvicorn", "server.app:app", "--host", host, "--port", port,
		"--ws", "websockets", "--log-level", "warning")
	cmd.Dir = dir
	cmd.Env = pythonEnv(env, extra)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return startCmd(b, addr, cmd)
}

// openenvEcho is a WebSocket to OpenEnv's /ws, speaking its frames:
// {"type": "reset"|"step", "data": ...}, answered with an observation. A
// reader goroutine keeps reading, so the server's keepalive pings are
// answered while a kept connection waits between blocks (as agentenv's
// client does).
type openenvEcho struct {
	ws     *websocket.Conn
	frames chan []byte
	err    chan error // the reader's end, once
}

func dialOpenEnvEcho(ctx context.Context, addr string) (*openenvEcho, error) {
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, "ws://"+addr+"/ws", nil)
	if err != nil {
		return nil, err
	}
	c := &openenvEcho{ws: ws, frames: make(chan []byte, 1), err: make(chan error, 1)}
	go func() {
		for {
			_, raw, err := ws.ReadMessage()
			if err != nil {
				c.err <- err
				return
			}
			c.frames <- raw
		}
	}()
	return c, nil
}

func (c *openenvEcho) Close() error { return c.ws.Close() }

// openenvEchoCall is the step frame calling echo_message with echoText.
var openenvEchoCall = mustJSON(map[string]any{"type": "step", "data": map[string]any{
	"type": "call_tool", "tool_name": "echo_message", "arguments": map[string]string{"message": echoText}}})

func mustJSON(v any) []byte {
	out, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return out
}

// roundTrip sends frame and decodes the observation frame answered.
func (c *openenvEcho) roundTrip(frame []byte) (map[string]any, error) {
	c.ws.SetWriteDeadline(time.Now().Add(time.Minute))
	if err := c.ws.WriteMessage(websocket.TextMessage, frame); err != nil {
		return nil, err
	}
	var raw []byte
	select {
	case raw = <-c.frames:
	case err := <-c.err:
		return nil, err
	case <-time.After(time.Minute):
		return nil, errors.New("no answer from OpenEnv in a minute")
	}
	var msg struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		return nil, fmt.Errorf("OpenEnv's answer %.200q: %w", raw, err)
	}
	if msg.Type != "observation" {
		return nil, fmt.Errorf("OpenEnv answered %.300s", raw)
	}
	return msg.Data, nil
}

// episode plays one echo_env episode, the same three round trips as
// playEchoEpisode: reset, echo_message (its result must carry the text
// back), echo_message again. echo_env never ends an episode itself
// (done stays false), so the third frame stands for agentenv's final
// reply: a call of the env's tool, as agentenv's verify_tool is.
func (c *openenvEcho) episode() error {
	if _, err := c.roundTrip([]byte(`{"type":"reset","data":{}}`)); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	for i := range 2 {
		data, err := c.roundTrip(openenvEchoCall)
		if err != nil {
			return fmt.Errorf("echo_message %d: %w", i+1, err)
		}
		obs, _ := data["observation"].(map[string]any)
		result, _ := obs["result"].(map[string]any)
		if got, _ := result["data"].(string); got != echoText || obs["error"] != nil {
			return fmt.Errorf("echo_message %d did not echo: %v", i+1, data)
		}
	}
	return nil
}
