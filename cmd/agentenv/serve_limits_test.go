package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// procStatus reads a field of /proc/<pid>/status in KiB (VmRSS, VmHWM).
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", field, line)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// A step whose one call holds a million schema-violating items costs the
// server under 300 MiB at its peak (VmHWM, the kernel's high-water mark of
// its resident memory), is answered with one short error, and the
// episode goes on.
func TestServeHugeStepMemoryIsBounded(t *testing.T) {
	addr := freeAddr(t)
	s := startServe(t, gridsimBundle, addr, t.TempDir(), nil)
	pid := s.cmd.Process.Pid
	c := dialServe(t, addr, "")
	c.observation(`{"type":"reset","data":{"split":"eval","index":0}}`)
	// Warm up the step path (plugin connection, schema compile) first.
	c.observation(`{"type":"step","data":{"reply":"<tool_call>{\"name\": \"get_prices\", \"arguments\": {}}</tool_call>"}}`)
	base := max(procStatus(t, pid, "VmHWM"), procStatus(t, pid, "VmRSS"))

	items := strings.Repeat(`"x",`, 999_999) + `"x"`
	call := `<tool_call>{"name": "submit_schedule", "arguments": {"schedule": [` + items + `]}}</tool_call>`
	frame, _ := json.Marshal(map[string]any{"type": "step", "data": map[string]string{"reply": call}})
	start := time.Now()
	obs := c.observation(string(frame))
	took := time.Since(start)
	peak := procStatus(t, pid, "VmHWM")
	t.Logf("server RSS peak %d MiB before the step, %d MiB after (+%d MiB); the step took %s",
		base>>10, peak>>10, (peak-base)>>10, took.Round(time.Millisecond))
	if grew := (peak - base) >> 10; grew >= 300 {
		t.Errorf("the server's peak memory grew %d MiB for one step, want under 300", grew)
	}
	msgs := obs["observation"].(map[string]any)["messages"].([]any)
	content := msgs[0].(map[string]any)["content"].(string)
	if len(msgs) != 1 || !strings.Contains(content, "more than 20000 JSON values") || len(content) > 1000 {
		t.Fatalf("answer to a million-item call: %d messages, first %.300q (%d bytes)", len(msgs), content, len(content))
	}

	// 11 MiB of malformed blocks: 20 errors and a count, at a bounded cost.
	obs = c.observation(`{"type":"step","data":{"reply":"` + strings.Repeat("<tool_call>x</tool_call>", 480_000) + `"}}`)
	msgs = obs["observation"].(map[string]any)["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)["content"].(string)
	if len(msgs) != 21 || !strings.Contains(last, "479980 more tool calls in this reply failed") {
		t.Fatalf("answer to 480,000 malformed blocks: %d messages, last %.200q", len(msgs), last)
	}
	if peak2 := procStatus(t, pid, "VmHWM"); (peak2-base)>>10 >= 300 {
		t.Errorf("after 11 MiB of malformed blocks the server's peak memory is %d MiB over its start, want under 300", (peak2-base)>>10)
	} else {
		t.Logf("after 11 MiB of malformed blocks: peak %d MiB (+%d MiB)", peak2>>10, (peak2-base)>>10)
	}

	final := c.observation(`{"type":"step","data":{"reply":"` + idleSchedule + `"}}`)
	final = c.observation(`{"type":"step","data":{"reply":"Done."}}`)
	if final["done"] != true || final["reward"] != 0.2 {
		t.Fatalf("the episode after the huge step: %v", final)
	}
	if code := s.signalAndWait(t, syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.log)
	}
}

// The replies of issue 34 (round 4) cost the real server bounded memory
// (VmHWM over its start): a 9.5 MiB Python literal (1.29 GiB before), a
// 6 MiB hex literal (8 s of a core before), and 24 replies of 15 MiB in
// one recorded episode (+635 MiB before: the live transcript kept every
// reply). Each is answered and the episode goes on.
func TestServeHostileRepliesAreBounded(t *testing.T) {
	addr := freeAddr(t)
	s := startServe(t, gridsimBundle, addr, t.TempDir(), nil, "--record", t.TempDir())
	pid := s.cmd.Process.Pid
	c := dialServe(t, addr, "")
	c.observation(`{"type":"reset","data":{"task_id":"day/eval-001","tool_format":"qwen3_coder"}}`)
	qwenCall := func(schedule string) string {
		return "<tool_call>\n<function=submit_schedule>\n<parameter=schedule>\n" + schedule + "\n</parameter>\n</function>\n</tool_call>"
	}
	step := func(reply string) string {
		frame, _ := json.Marshal(map[string]any{"type": "step", "data": map[string]string{"reply": reply}})
		obs := c.observation(string(frame))
		if obs["done"] == true {
			t.Fatalf("the episode ended: %v", obs)
		}
		msgs := obs["observation"].(map[string]any)["messages"].([]any)
		return msgs[0].(map[string]any)["content"].(string)
	}
	step(qwenCall("[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]")) // warm the path
	base := max(procStatus(t, pid, "VmHWM"), procStatus(t, pid, "VmRSS"))
	checkPeak := func(what string) {
		t.Helper()
		peak := procStatus(t, pid, "VmHWM")
		t.Logf("after %s: peak %d MiB (+%d MiB over the start)", what, peak>>10, (peak-base)>>10)
		if grew := (peak - base) >> 10; grew >= 300 {
			t.Errorf("after %s the server's peak memory grew %d MiB, want under 300", what, grew)
		}
	}

	if got := step(qwenCall("[" + strings.Repeat("0,", 4_980_000) + "]")); !strings.Contains(got, "more than 20000 JSON values") {
		t.Errorf("answer to a 9.5 MiB literal: %.300q", got)
	}
	checkPeak("a 9.5 MiB Python literal")
	if got := step(qwenCall("[0x" + strings.Repeat("f", 6<<20) + "]")); !strings.Contains(got, "more than 4300 digits") {
		t.Errorf("answer to a 6 MiB hex literal: %.300q", got)
	}
	checkPeak("a 6 MiB hex literal")
	long := strings.Repeat("x", 15<<20) + qwenCall("[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]")
	for range 24 {
		step(long)
	}
	checkPeak("24 replies of 15 MiB")
	if code := s.signalAndWait(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.log)
	}
}
