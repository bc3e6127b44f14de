package main

// Harbor datasets end to end through agentenv serve with the Docker
// sandbox: examples/harbor's tasks played by their oracle (reward 1) and by
// an agent that does nothing (reward 0) over the WebSocket protocol, the
// shell calls in the transcript, broken tasks failing with their causes,
// and nothing left after SIGTERM or after SIGKILL and a restart.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/dataset/skyrl"
	"github.com/agentenv/agentenv/core/dataset/skyrl/oracles"
	"github.com/agentenv/agentenv/core/oracle"
	"github.com/agentenv/agentenv/core/runtime"
	"github.com/agentenv/agentenv/internal/servetest"
	"github.com/agentenv/agentenv/plugins/sandbox-local/dockertest"
)

const harborExample = "../../examples/harbor"

var (
	harborBaseOnce sync.Once
	harborBaseErr  error
)

// harborEnv is what serving a Harbor dataset needs here: a Docker engine,
// the tests' base image (scripts/harbor-base-image.sh, cached) and the
// static terminal binary. It returns serve's extra environment.
func harborEnv(t *testing.T) []string {
	t.Helper()
	dockertest.Client(t)
	harborBaseOnce.Do(func() {
		cmd := exec.Command("bash", filepath.Join(servetest.ModuleRoot(), "scripts", "harbor-base-image.sh"))
		// The base image's rootfs cache is the user's, not the test run's.
		cmd.Env = append(os.Environ(), "XDG_CACHE_HOME=")
		if out, err := cmd.CombinedOutput(); err != nil {
			harborBaseErr = fmt.Errorf("scripts/harbor-base-image.sh: %v\n%s", err, out)
		}
	})
	if harborBaseErr != nil {
		t.Fatalf("the Harbor tests' base image: %v", harborBaseErr)
	}
	return []string{"AGENTENV_TERMINAL_BINARY=" + servetest.TerminalBinary(t)}
}

// harborLeft lists the containers and networks of the server at addr
// serving dir.
func harborLeft(t *testing.T, dir, addr string) []string {
	t.Helper()
	id, err := runtime.ServerID(dir, addr)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, args := range [][]string{
		{"ps", "-aq", "--filter", "label=agentenv.server=" + id},
		{"network", "ls", "-q", "--filter", "label=agentenv.server=" + id},
	} {
		out, err := exec.Command("docker", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		for _, f := range strings.Fields(string(out)) {
			left = append(left, args[0]+" "+f)
		}
	}
	return left
}

func stepFrame(reply string) string {
	b, _ := json.Marshal(map[string]any{"type": "step", "data": map[string]any{"reply": reply}})
	return string(b)
}

// playHarbor plays task: reply (if any), then a reply without a tool call.
// It returns the final observation data and the first step's messages.
func playHarbor(t *testing.T, c *e2eClient, task, reply string) (map[string]any, string) {
	t.Helper()
	first := c.observation(`{"type":"reset","data":{"task_id":"` + task + `"}}`)
	obs := first["observation"].(map[string]any)
	msgs, _ := json.Marshal(obs["messages"])
	if !strings.Contains(string(msgs), "reply without a tool call") {
		t.Fatalf("%s: the opening prompt lacks the system prompt: %s", task, msgs)
	}
	var out string
	if reply != "" {
		d := c.observation(stepFrame(reply))
		b, _ := json.Marshal(d["observation"].(map[string]any)["messages"])
		out = string(b)
		if d["done"] == true {
			t.Fatalf("%s: the episode ended on the oracle's tool calls: %v", task, d)
		}
	}
	return c.observation(stepFrame("I am done.<|im_end|>")), out
}

func TestHarborServeEndToEnd(t *testing.T) {
	env := harborEnv(t)
	rec := t.TempDir()
	addr := freeAddr(t)
	s := startServe(t, harborExample, addr, "", env, "--sandbox-config", "mode=docker", "--reward", "mean", "--tool-format", "hermes", "--record", rec)
	b, err := bundle.Load(harborExample, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The catalogue: every task shares one toolset, the terminal's two
	// tools (run_tests is the verifier's, never offered).
	var page struct {
		Size  int
		Tasks []struct{ Toolset string }
	}
	getJSON(t, addr, "/splits/harbor/tasks?start=0&stop=4", &page)
	if page.Size != 4 || len(page.Tasks) != 4 || page.Tasks[0].Toolset == "" || page.Tasks[3].Toolset != page.Tasks[0].Toolset {
		t.Fatalf("harbor split: %+v", page)
	}
	var tools struct {
		Tools []struct{ Function struct{ Name string } }
	}
	getJSON(t, addr, "/toolsets/"+page.Tasks[0].Toolset+"/tools", &tools)
	if len(tools.Tools) != 2 || tools.Tools[0].Function.Name != "shell" || tools.Tools[1].Function.Name != "editor" {
		t.Fatalf("toolset tools: %+v", tools)
	}
	// SkyRL's rows: the instruction as the user turn, the terminal's tools
	// in the system message through Qwen3's chat template.
	rows := filepath.Join(t.TempDir(), "rows")
	if stdout, stderr, code := runSkyrl(t, nil, "http://"+addr, rows, "--tokenizer", oracles.Qwen3Dir(t), "--max-prompt-length", "4096"); code != 0 {
		t.Fatalf("skyrl rows: exit %d\n%s%s", code, stdout, stderr)
	}
	got, err := skyrl.ReadRows(filepath.Join(rows, "harbor.parquet"))
	if err != nil || len(got) != 4 {
		t.Fatalf("harbor.parquet: %d rows, %v", len(got), err)
	}
	for i, r := range got {
		task, _ := b.Task(r.Episode.TaskID)
		if task == nil || strings.Join(r.Episode.Tools, ",") != "shell,editor" || len(r.Prompt) != 2 ||
			!strings.Contains(r.Prompt[0].Content, bundle.HarborSystemPrompt) ||
			!strings.Contains(r.Prompt[0].Content, `{"type": "function", "function": {"name": "shell"`) ||
			r.Prompt[1].Role != "user" || r.Prompt[1].Content != task.Steps[1].Prompt {
			t.Fatalf("row %d: %+v", i, r)
		}
	}
	c := dialServe(t, addr, "")
	for _, task := range b.Tasks {
		reply, err := oracle.SolutionReply(task.Harbor.SolutionDir, task.Harbor.SolutionEnv)
		if err != nil {
			t.Fatal(err)
		}
		final, out := playHarbor(t, c, task.ID, reply)
		if final["done"] != true || final["reward"] != 1.0 {
			t.Errorf("%s with its oracle: %v\nthe oracle's tool results: %s", task.ID, final, out)
		}
		if !strings.Contains(out, "exit code: 0") {
			t.Errorf("%s: solve.sh's shell result does not say it exited 0: %s", task.ID, out)
		}
		final, _ = playHarbor(t, c, task.ID, "")
		if final["done"] != true || final["reward"] != 0.0 {
			t.Errorf("%s doing nothing: %v, want reward 0", task.ID, final)
		}
		metrics := final["observation"].(map[string]any)["metrics"].(map[string]any)
		if task.ID == "two-scores" && (metrics["score/numbers"] != 0.0 || metrics["score/sum"] != 0.0) {
			t.Errorf("two-scores' reward.json scores: %v", metrics)
		}
	}
	if code := s.signalAndWait(t, syscall.SIGTERM, time.Minute); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, s.log)
	}
	if left := harborLeft(t, harborExample, addr); len(left) != 0 {
		t.Errorf("left after SIGTERM: %v", left)
	}
	// The transcript holds the shell calls and their outputs.
	files, _ := filepath.Glob(filepath.Join(rec, "*.jsonl"))
	var all strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(data)
	}
	for _, want := range []string{"bash /solution/solve.sh", `"name":"shell"`, "exit code: 0"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("the transcripts lack %q:\n%.3000s", want, all.String())
		}
	}
}

func TestHarborBrokenTasksFailWithTheirCause(t *testing.T) {
	env := harborEnv(t)
	dir := "testdata/harbor-broken"
	addr := freeAddr(t)
	s := startServe(t, dir, addr, "", env, "--sandbox-config", "mode=docker")
	c := dialServe(t, addr, "")
	typ, data, err := c.call(`{"type":"reset","data":{"task_id":"build-fails"}}`)
	if err != nil || typ != "error" || data["code"] != "DEPLOY_FAILED" || !strings.Contains(data["message"].(string), "build") {
		t.Errorf("build-fails: %s %v %v", typ, data, err)
	}
	for task, want := range map[string]string{
		"verifier-timeout": "ran past",
		"no-reward":        "without writing",
		"garbage-reward":   "not a number",
	} {
		c := dialServe(t, addr, "")
		c.observation(`{"type":"reset","data":{"task_id":"` + task + `"}}`)
		typ, data, err := c.call(stepFrame("done"))
		if err != nil || typ != "error" || data["code"] != "UNSCORED" || !strings.Contains(data["message"].(string), want) {
			t.Errorf("%s: %s %v %v, want UNSCORED saying %q", task, typ, data, err, want)
		}
	}
	text := metricsText(t, addr, "")
	if metric(text, `agentenv_episodes_total{outcome="failed"}`) < 3 {
		t.Errorf("failed episodes in /metrics:\n%s", text)
	}
	for _, cause := range []string{"timeout", "unscored", "deploy_failed"} {
		if !strings.Contains(text, `cause="`+cause+`"`) {
			t.Errorf("/metrics shows no failure of cause %s", cause)
		}
	}
	if code := s.signalAndWait(t, syscall.SIGTERM, time.Minute); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, s.log)
	}
	if left := harborLeft(t, dir, addr); len(left) != 0 {
		t.Errorf("left after SIGTERM: %v", left)
	}
}

func TestHarborSigkillThenRestartLeavesNothing(t *testing.T) {
	env := harborEnv(t)
	addr := freeAddr(t)
	s := startServe(t, harborExample, addr, "", env, "--sandbox-config", "mode=docker", "--reward", "mean", "--tool-format", "hermes")
	for _, task := range []string{"hello-file", "offline"} {
		c := dialServe(t, addr, "")
		c.observation(`{"type":"reset","data":{"task_id":"` + task + `"}}`)
	}
	if left := harborLeft(t, harborExample, addr); len(left) < 2 {
		t.Fatalf("live episodes have %v: nothing for a restart to reap, the test proves nothing", left)
	}
	s.signalAndWait(t, syscall.SIGKILL, 10*time.Second)
	again := startServe(t, harborExample, addr, "", env, "--sandbox-config", "mode=docker", "--reward", "mean", "--tool-format", "hermes")
	if left := harborLeft(t, harborExample, addr); len(left) != 0 {
		t.Errorf("left after the restart: %v", left)
	}
	if code := again.signalAndWait(t, syscall.SIGTERM, time.Minute); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// The oracle check, as a dataset author runs it.
func TestHarborCheckCommand(t *testing.T) {
	env := harborEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, agentenv(t), "harbor", "check", harborExample, "--json")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("harbor check: %v\n%s", err, out)
	}
	var rows []oracle.Row
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var r oracle.Row
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows: %s", len(rows), out)
	}
	for _, r := range rows {
		if !r.OK() || !r.Built || r.Deploy <= 0 || r.Verify <= 0 {
			t.Errorf("row %+v", r)
		}
	}
	// A broken dataset: exit 2, the broken tasks named.
	cmd = exec.CommandContext(ctx, agentenv(t), "harbor", "check", "testdata/harbor-broken")
	cmd.Env = append(os.Environ(), env...)
	out, err = cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "verifier-timeout") {
		t.Fatalf("harbor check of broken tasks: %v\n%s", err, out)
	}
}

func getJSON(t *testing.T, addr, path string, v any) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}
