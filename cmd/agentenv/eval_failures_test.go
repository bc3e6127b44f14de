package main

// End-to-end tests of what goes wrong around `agentenv eval`: a failing
// model endpoint, failing env deploys, a kill mid-run, refusals, tokens.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/agentenv/agentenv/core/dataset/skyrl/oracles"
	"github.com/agentenv/agentenv/core/eval"
)

// failingEndpoint answers each rollout in one of four ways, in turn: as
// the idle policy, with HTTP 500, with garbage, or not at all.
func failingEndpoint(t *testing.T) string {
	var mu sync.Mutex
	modes := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet { // eval's check that the endpoint is up (GET /models)
			w.Write([]byte(`{"object": "list", "data": []}`))
			return
		}
		var req struct{ Messages []eval.Message }
		json.NewDecoder(r.Body).Decode(&req)
		day := req.Messages[1].Content
		mu.Lock()
		mode, ok := modes[day]
		if !ok {
			mode = len(modes) % 4
			modes[day] = mode
		}
		mu.Unlock()
		switch mode {
		case 0:
			reply := "<tool_call>\n{\"name\": \"submit_schedule\", \"arguments\": {\"schedule\": [" + strings.TrimSuffix(strings.Repeat("0, ", 24), ", ") + "]}}\n</tool_call>"
			if len(req.Messages) > 2 {
				reply = "Done."
			}
			b, _ := json.Marshal(reply)
			io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":`+string(b)+`},"finish_reason":"stop"}]}`)
		case 1:
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"error":{"message":"the model is down","type":"InternalServerError","code":500}}`)
		case 2:
			io.WriteString(w, "\x00\x01 not json")
		case 3:
			<-r.Context().Done()
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// A model endpoint that errors, returns garbage or times out fails those
// rollouts, each reported with its cause; the others are scored; nothing
// is retried; the exit status says some failed.
func TestEvalModelFailures(t *testing.T) {
	addr := freeAddr(t)
	srv := startServe(t, gridsimBundle, addr, t.TempDir(), nil)
	model := failingEndpoint(t)
	out := filepath.Join(t.TempDir(), "r.jsonl")
	stdout, stderr, code := runEvalCmd(t, evalArgs(t, addr, model, "flaky", out, "--limit", "8", "--concurrency", "8", "--model-timeout", "1s")...)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s\n%s", code, stdout, stderr)
	}
	for _, w := range []string{"8 of 8 rollouts, 2 scored, 6 failed", "mean reward    0.050 ±", "0.200 over the 2 scored", "failed (model) 6, e.g. model endpoint: "} {
		if !strings.Contains(stdout, w) {
			t.Errorf("summary lacks %q:\n%s", w, stdout)
		}
	}
	recs := readRecords(t, out)
	if len(recs) != 8 {
		t.Fatalf("%d lines", len(recs))
	}
	causes := map[string]int{}
	for _, r := range recs {
		if r.Attempts != 1 {
			t.Errorf("%s: a model failure was played again (%d attempts)", r.TaskID, r.Attempts)
		}
		switch {
		case r.Failure == nil && *r.Reward == 0.2:
			causes["scored"]++
		case r.Failure != nil && r.Failure.Cause == eval.CauseModel && r.Reward == nil:
			for _, want := range []string{"HTTP 500: the model is down", "the answer is not a chat completion", "no answer within 1s (--model-timeout)"} {
				if strings.Contains(r.Failure.Error, want) {
					causes[want]++
				}
			}
			if len(r.Messages) != 2 {
				t.Errorf("%s: a failed first request keeps %d messages", r.TaskID, len(r.Messages))
			}
		default:
			t.Errorf("record %+v", r)
		}
	}
	if len(causes) != 4 || causes["scored"] != 2 || causes["HTTP 500: the model is down"] != 2 {
		t.Fatalf("outcomes %v", causes)
	}
	// Every episode the failed rollouts left was torn down.
	wait.For(t, "no episode left live", func() error {
		if text := metricsText(t, addr, ""); metric(text, "agentenv_episodes_live") != 0 {
			return fmt.Errorf("episodes live:\n%s", text)
		}
		return nil
	}, wait.Every(50*time.Millisecond))
	_ = srv
}

// flakyBundle copies GridSim with an env whose deploys fail by number:
// failDeploys writes the numbers (from 0, counted from now) that fail.
func flakyBundle(t *testing.T) (dir string, failDeploys func(numbers string)) {
	t.Helper()
	src, _ := filepath.Abs(gridsimBundle)
	dir = filepath.Join(t.TempDir(), "flakygrid")
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	envDir := filepath.Join(dir, "envs", "gridsim")
	script := `d="$AGENTENV_ENV_DIR"; mkdir -p "$d/marks"; n=$(ls "$d/marks" | wc -l); touch "$d/marks/$$"; ` +
		`case " $(cat "$d/fail") " in *" $n "*) echo flaky deploy $n >&2; exit 3;; esac; exec "$d/bin/gridsim-env"`
	// Built from the repository's source: the copy sits outside the module.
	toml := fmt.Sprintf(`build = ["env", "CGO_ENABLED=0", "go", "build", "-C", %q, "-trimpath", "-o", %q, "."]`+"\n",
		filepath.Join(src, "envs", "gridsim"), filepath.Join(envDir, "bin", "gridsim-env")) +
		fmt.Sprintf("command = [\"sh\", \"-c\", %q]\nport = 18765\n", script)
	if err := os.WriteFile(filepath.Join(envDir, "env.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	failDeploys = func(numbers string) {
		os.RemoveAll(filepath.Join(envDir, "marks"))
		if err := os.WriteFile(filepath.Join(envDir, "fail"), []byte(numbers), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	failDeploys("")
	return dir, failDeploys
}

// A rollout the env fails is played again on a new episode, up to
// --attempts; past them it fails with the env's cause.
func TestEvalEnvFailuresAreRetried(t *testing.T) {
	bundle, failDeploys := flakyBundle(t)
	addr := freeAddr(t)
	startServe(t, bundle, addr, t.TempDir(), nil)
	model := startPolicy(t)
	dir := t.TempDir()
	for _, c := range []struct {
		name, fail string
		attempts   string
		code       int
		check      func(t *testing.T, s eval.Summary, r eval.Record)
	}{
		// Deploy 1 lists the toolset's tools for the first prompt (the server
		// keeps them after: this case runs first).
		{"listing the tools fails, then scored", "1 2", "3", 0, func(t *testing.T, s eval.Summary, r eval.Record) {
			if r.Attempts != 3 || len(r.EnvErrors) != 2 || !strings.Contains(r.EnvErrors[0], "list its tools") || *r.Reward != 1 {
				t.Fatalf("%+v\n%+v", s, r)
			}
		}},
		{"two failed deploys, then scored", "0 1", "3", 0, func(t *testing.T, s eval.Summary, r eval.Record) {
			if s.Replayed != 1 || r.Attempts != 3 || len(r.EnvErrors) != 2 || !strings.Contains(r.EnvErrors[0], "DEPLOY_FAILED") || *r.Reward != 1 {
				t.Fatalf("%+v\n%+v", s, r)
			}
		}},
		{"past the attempts", "0 1", "2", 2, func(t *testing.T, s eval.Summary, r eval.Record) {
			if s.Failures["env"] != 1 || r.Attempts != 2 || r.Failure == nil || r.Failure.Cause != "env" || r.Reward != nil ||
				!strings.Contains(r.Failure.Error, "DEPLOY_FAILED") || len(r.EnvErrors) != 1 {
				t.Fatalf("%+v\n%+v", s, r)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			failDeploys(c.fail)
			out := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".jsonl")
			stdout, stderr, code := runEvalCmd(t, evalArgs(t, addr, model, "optimal", out, "--limit", "1", "--attempts", c.attempts, "--json")...)
			if code != c.code || !strings.Contains(stderr, "the env failed a rollout; playing it again on a new episode") {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			c.check(t, decodeSummary(t, stdout, stderr), readRecords(t, out)[0])
		})
	}
}

// An eval killed mid-run goes on with --resume: the finished rollouts are
// kept as they were, a line cut off by the kill is played again, and no
// rollout is lost or played twice.
func TestEvalResumeAfterKill(t *testing.T) {
	addr := freeAddr(t)
	startServe(t, gridsimBundle, addr, t.TempDir(), nil)
	model := startPolicy(t, "--delay", "30ms")
	out := filepath.Join(t.TempDir(), "r.jsonl")
	args := evalArgs(t, addr, model, "idle", out, "--limit", "40", "--concurrency", "4", "--json")
	cmd := exec.Command(agentenv(t), append([]string{"eval"}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() }) // if the wait fails; a second kill is harmless
	wait.For(t, "8 rollouts written", func() error {
		b, _ := os.ReadFile(out)
		if n := bytes.Count(b, []byte("\n")); n < 8 {
			return fmt.Errorf("%d rollouts", n)
		}
		return nil
	}, wait.Timeout(2*time.Minute), wait.Every(5*time.Millisecond))
	cmd.Process.Kill() // SIGKILL: no cleanup of any kind
	cmd.Wait()
	killed, _ := os.ReadFile(out)
	lines := bytes.Count(killed, []byte("\n"))
	if lines >= 40 {
		t.Fatalf("the eval finished (%d lines) before it was killed", lines)
	}
	// Cut the last line in half, as a kill during its write would.
	last := bytes.LastIndexByte(killed[:len(killed)-1], '\n') + 1
	cut := killed[:last+(len(killed)-last)/2]
	if err := os.WriteFile(out, cut, 0o644); err != nil {
		t.Fatal(err)
	}
	kept := lines - 1
	// Wait for the killed run's episodes to be torn down, then count.
	wait.For(t, "no episode left live", func() error {
		if text := metricsText(t, addr, ""); metric(text, "agentenv_episodes_live") != 0 {
			return fmt.Errorf("episodes live:\n%s", text)
		}
		return nil
	}, wait.Every(50*time.Millisecond))
	doneBefore := metric(metricsText(t, addr, ""), `agentenv_episodes_total{outcome="done"}`)

	stdout, stderr, code := runEvalCmd(t, append(args, "--resume")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s := decodeSummary(t, stdout, stderr)
	if s.Rollouts != 40 || s.Resumed != kept || s.Played != 40-kept || s.MeanReward < 0.2-1e-9 || s.MeanReward > 0.2+1e-9 {
		t.Fatalf("%+v, kept %d", s, kept)
	}
	if !strings.Contains(stderr, "removed a half-written last line") {
		t.Errorf("stderr:\n%s", stderr)
	}
	if played := metric(metricsText(t, addr, ""), `agentenv_episodes_total{outcome="done"}`) - doneBefore; int(played) != 40-kept {
		t.Fatalf("the server played %v episodes on resume, want %d", played, 40-kept)
	}
	after, _ := os.ReadFile(out)
	if !bytes.HasPrefix(after, killed[:last]) {
		t.Fatal("the kept lines changed")
	}
	recs := readRecords(t, out)
	seen := map[string]bool{}
	for _, r := range recs {
		if seen[r.TaskID] {
			t.Fatalf("%s twice", r.TaskID)
		}
		seen[r.TaskID] = true
	}
	if len(recs) != 40 || len(seen) != 40 {
		t.Fatalf("%d lines, %d tasks", len(recs), len(seen))
	}
	// Nothing left to play: a second resume plays nothing.
	stdout, stderr, code = runEvalCmd(t, append(args, "--resume")...)
	if s := decodeSummary(t, stdout, stderr); code != 0 || s.Played != 0 || s.Resumed != 40 {
		t.Fatalf("exit %d %+v", code, s)
	}
}

// What eval refuses, and how it says so.
func TestEvalRefusals(t *testing.T) {
	addr := freeAddr(t)
	startServe(t, gridsimBundle, addr, t.TempDir(), nil)
	model := startPolicy(t)
	dir := t.TempDir()
	recursive := hostileTokenizer(t, oracles.Qwen3Dir(t), "chat_template.jinja", recursiveTemplate)
	zero := hostileTokenizer(t, oracles.Qwen3Dir(t), "chat_template.jinja", "/dev/zero")
	existing := filepath.Join(dir, "existing.jsonl")
	os.WriteFile(existing, []byte(`{"task_id":"day/eval-001","split":"eval","model":"other","tool_format":"hermes"}`+"\n"), 0o644)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"results there", evalArgs(t, addr, model, "idle", existing), "--out " + existing + " already holds 1 lines: pass --resume to go on with that eval, or name another file"},
		{"another eval's results", evalArgs(t, addr, model, "idle", existing, "--resume"), `line 1: a rollout of split "eval", model "other", tool format "hermes"; this eval is split "eval", model "idle"`},
		{"no such split", evalArgs(t, addr, model, "idle", filepath.Join(dir, "a.jsonl"), "--split", "test"), "--split test: the server has no such split; it has all, eval, train"},
		{"a tool format the server lacks", evalArgs(t, addr, model, "idle", filepath.Join(dir, "b.jsonl"), "--tool-format", "xml", "--limit", "2"), "the server refused to start task day/eval-00"},
		{"no server", evalArgs(t, freeAddr(t), model, "idle", filepath.Join(dir, "c.jsonl")), "connection refused\nno server is listening at 127.0.0.1:"},
		// Checked first: it used to deploy and play every rollout before
		// failing them all.
		{"model endpoint down", evalArgs(t, addr, "http://"+freeAddr(t)+"/v1", "idle", filepath.Join(dir, "c2.jsonl")), "does not answer"},
		{"retry without resume", evalArgs(t, addr, model, "idle", filepath.Join(dir, "d.jsonl"), "--retry-failed"), "--retry-failed goes with --resume"},
		{"bad kwargs", evalArgs(t, addr, model, "idle", filepath.Join(dir, "e.jsonl"), "--chat-template-kwargs", "{x}"), "--chat-template-kwargs: chat template kwargs: not valid JSON"},
		{"bad model URL", evalArgs(t, addr, "localhost:8000", "idle", filepath.Join(dir, "f.jsonl")), "--model-url: want the API's base URL"},
		{"unknown model", evalArgs(t, addr, model, "gpt-5", filepath.Join(dir, "g.jsonl"), "--limit", "1"), "The model `gpt-5` does not exist"},
		// A tokenizer folder is anyone's: a template that recurses without
		// end fails naming its file (it was a fatal stack overflow), a
		// template linked to /dev/zero is refused (it was read out of memory).
		{"self-recursive template", evalArgs(t, addr, model, "idle", filepath.Join(dir, "h.jsonl"), "--limit", "1", "--tokenizer", recursive),
			filepath.Join(recursive, "chat_template.jinja") + ": the chat template broke a bound of its sandbox: it recursed past 64 MiB of stack"},
		{"template linked to /dev/zero", evalArgs(t, addr, model, "idle", filepath.Join(dir, "i.jsonl"), "--tokenizer", zero),
			filepath.Join(zero, "chat_template.jinja") + ": not a regular file but a character device"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := runEvalCmd(t, c.args...)
			want := 1
			if c.name == "unknown model" {
				want = 2 // a model failure, per rollout
				stderr = stdout
			}
			if code != want || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, output lacks %q:\n%s\n%s", code, c.want, stdout, stderr)
			}
		})
	}
	if b, _ := os.ReadFile(existing); bytes.Count(b, []byte("\n")) != 1 {
		t.Fatal("a refused results file was changed")
	}
	if _, err := os.Stat(filepath.Join(dir, "c2.jsonl")); !os.IsNotExist(err) {
		t.Errorf("with the model endpoint down, eval wrote results: %v", err)
	}
}

// A server with a token: eval without it is told how to give it; with it
// (--token-var) every session carries it. --samples plays each task that
// many times.
func TestEvalTokenAndSamples(t *testing.T) {
	addr := freeAddr(t)
	startServe(t, gridsimBundle, addr, t.TempDir(), []string{"E2E_TOKEN=" + e2eToken}, "--token-var", "E2E_TOKEN")
	model := startPolicy(t)
	dir := t.TempDir()
	stdout, stderr, code := runEvalEnv(t, []string{"AGENTENV_TOKEN="}, evalArgs(t, addr, model, "idle", filepath.Join(dir, "a.jsonl"), "--limit", "2")...)
	if code != 1 || !strings.Contains(stderr, "the server refused the token: the server wants a token; export it in $AGENTENV_TOKEN (or name the variable with --token-var)") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	out := filepath.Join(dir, "b.jsonl")
	stdout, stderr, code = runEvalEnv(t, []string{"E2E_TOKEN=" + e2eToken}, evalArgs(t, addr, model, "random", out, "--limit", "3", "--samples", "2", "--token-var", "E2E_TOKEN", "--json")...)
	if code != 0 || strings.Contains(stdout+stderr, e2eToken) {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if s := decodeSummary(t, stdout, stderr); s.Rollouts != 6 || s.Expected != 6 {
		t.Fatalf("%+v", s)
	}
	got := map[string]float64{}
	for _, r := range readRecords(t, out) {
		got[fmt.Sprintf("%s/%d", r.TaskID, r.Sample)] = *r.Reward
	}
	// The random policy is seeded by the day: both samples of a day agree.
	for _, day := range []string{"day/eval-001", "day/eval-002", "day/eval-003"} {
		a, okA := got[day+"/0"]
		b, okB := got[day+"/1"]
		if !okA || !okB || a != b {
			t.Fatalf("samples %v", got)
		}
	}
	if len(got) != 6 {
		t.Fatalf("samples %v", got)
	}
}
