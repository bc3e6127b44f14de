package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/testenv/testenvbuild"
)

// floodBundle is a one-task bundle over the test env, whose flood tool
// returns a result of any size.
func floodBundle(t *testing.T) string {
	t.Helper()
	bin, err := testenvbuild.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"README.md":           "An env whose tool answers as much as it is asked.\n",
		"envs/flood/env.toml": fmt.Sprintf("command = [%q]\n", bin),
		"tasks/flood.json": `[
  {"id": "env", "type": "deploy_env", "env": "flood"},
  {"id": "load", "type": "call_tool", "tool": "load_puzzle", "arguments": {"target": 1}},
  {"id": "play", "type": "prompt_agent", "prompt": "Flood.", "tools": ["flood", "add"]},
  {"id": "grade", "type": "verify_tool", "tool": "grade"}
]
`,
	}
	for path, content := range files {
		full := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// An env answering a tool call with 100 MiB, then a reply of 16 calls of
// 16 MiB each, cost the real server little over its start (VmHWM: it was
// ~800 MiB and 1.35 GB, and a 268 MB frame), are answered with results cut
// to --max-result-bytes and --max-reply-result-bytes that say so, in
// frames a client limited to 64 MiB (the SkyRL client) reads, and the
// session goes on.
func TestServeHugeToolResultsAreBounded(t *testing.T) {
	addr := freeAddr(t)
	s := startServe(t, floodBundle(t), addr, t.TempDir(), nil)
	pid := s.cmd.Process.Pid
	c := dialServe(t, addr, "")
	c.conn.SetReadLimit(64 << 20) // the SkyRL client's _MAX_FRAME
	c.observation(`{"type":"reset","data":{"task_id":"flood"}}`)
	flood := func(bytes, n int) string {
		call := fmt.Sprintf(`<tool_call>{"name": "flood", "arguments": {"bytes": %d}}</tool_call>`, bytes)
		frame, _ := json.Marshal(map[string]any{"type": "step", "data": map[string]string{"reply": strings.Repeat(call, n)}})
		return string(frame)
	}
	c.observation(flood(1000, 1)) // warm up the step path
	base := max(procStatus(t, pid, "VmHWM"), procStatus(t, pid, "VmRSS"))
	for _, tc := range []struct {
		name         string
		bytes, calls int
		maxTotal     int
	}{
		{"one 100 MiB result", 100 << 20, 1, 4<<20 + 1000},
		{"16 results of 16 MiB", 16 << 20, 16, 16<<20 + 16*1000},
	} {
		start := time.Now()
		typ, data, err := c.call(flood(tc.bytes, tc.calls))
		if err != nil || typ != "observation" {
			t.Fatalf("%s: %s %v %v", tc.name, typ, data, err)
		}
		peak := procStatus(t, pid, "VmHWM")
		t.Logf("%s: server RSS peak %d MiB before, %d MiB after (+%d MiB); took %s", tc.name, base>>10, peak>>10, (peak-base)>>10, time.Since(start).Round(time.Millisecond))
		if grew := (peak - base) >> 10; grew >= 200 {
			t.Errorf("%s: the server's peak memory grew %d MiB, want under 200", tc.name, grew)
		}
		msgs := data["observation"].(map[string]any)["messages"].([]any)
		if len(msgs) != tc.calls {
			t.Fatalf("%s: %d messages", tc.name, len(msgs))
		}
		total := 0
		for _, m := range msgs {
			content := m.(map[string]any)["content"].(string)
			total += len(content)
			if !strings.Contains(content, "[agentenv: the tool's result was cut here") {
				t.Errorf("%s: a result does not say it was cut: ...%q", tc.name, content[max(len(content)-100, 0):])
			}
		}
		if total > tc.maxTotal {
			t.Errorf("%s: the results hold %d bytes, want at most %d", tc.name, total, tc.maxTotal)
		}
	}
	final := c.observation(`{"type":"step","data":{"reply":"<tool_call>{\"name\": \"add\", \"arguments\": {\"n\": 1}}</tool_call>"}}`)
	if msgs := final["observation"].(map[string]any)["messages"].([]any); msgs[0].(map[string]any)["content"] != "1" {
		t.Fatalf("the session after the floods: %v", final)
	}
	if code := s.signalAndWait(t, syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.log)
	}
}
