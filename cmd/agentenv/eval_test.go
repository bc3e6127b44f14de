package main

// End-to-end tests of `agentenv eval`: the real binary as a subprocess,
// against `agentenv serve examples/gridsim` and the GridSim policy server
// (examples/gridsim/cmd/gridsim-policy); eval_failures_test.go holds the
// failures.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/agentenv/agentenv/core/dataset/skyrl"
	"github.com/agentenv/agentenv/core/dataset/skyrl/oracles"
	"github.com/agentenv/agentenv/core/eval"
	"github.com/agentenv/agentenv/internal/servetest"
)

// gridsimPolicy builds the policy server once per run.
func gridsimPolicy(t *testing.T) string {
	t.Helper()
	return servetest.Build(t, "github.com/agentenv/agentenv/examples/gridsim/cmd/gridsim-policy", "")
}

// startPolicy runs the policy server and returns its API base URL.
func startPolicy(t *testing.T, args ...string) string {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(gridsimPolicy(t), append([]string{"--addr", addr, "--log-level", "warn"}, args...)...)
	log := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	wait.For(t, "gridsim-policy to answer /health", func() error {
		resp, err := http.Get("http://" + addr + "/health")
		if err != nil {
			return fmt.Errorf("%w; its log:\n%s", err, log)
		}
		resp.Body.Close()
		return nil
	})
	return "http://" + addr + "/v1"
}

// runEvalCmd runs agentenv eval, returning stdout, stderr and the exit code.
func runEvalCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runEvalEnv(t, nil, args...)
}

// runEvalEnv runs agentenv eval with env added to its environment.
func runEvalEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(agentenv(t), append([]string{"eval"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

const noThinking = `{"enable_thinking": false}`

// evalArgs are the common arguments: the server, the endpoint, the model
// and Qwen3's tokenizer, and the results file.
func evalArgs(t *testing.T, server, modelURL, model, out string, more ...string) []string {
	return append([]string{"http://" + server, "--model-url", modelURL, "--model", model,
		"--tokenizer", oracles.Qwen3Dir(t), "--chat-template-kwargs", noThinking, "--out", out}, more...)
}

func decodeSummary(t *testing.T, stdout, stderr string) eval.Summary {
	t.Helper()
	var s eval.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("--json output: %v\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	return s
}

func readRecords(t *testing.T, path string) []eval.Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []eval.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r eval.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s line %d: %v", path, len(out)+1, err)
		}
		out = append(out, r)
	}
	return out
}

// The scripted policies on the 200 eval days, through a real server: the
// documented baselines, the malformed policy's calls unparsed with their
// reasons, each prompt the one `skyrl rows` writes, and the greedy
// policy's perfect days as an SFT file DuckDB reads.
func TestEvalGridSimPolicies(t *testing.T) {
	addr := freeAddr(t)
	srv := startServe(t, gridsimBundle, addr, t.TempDir(), nil)
	model := startPolicy(t)
	dir := t.TempDir()

	// The rows writer's prompts for the same split, to compare with.
	rowsDir := filepath.Join(dir, "rows")
	if stdout, stderr, code := runSkyrl(t, nil, "http://"+addr, rowsDir, "--tokenizer", oracles.Qwen3Dir(t),
		"--max-prompt-length", "3072", "--chat-template-kwargs", noThinking, "--splits", "eval"); code != 0 {
		t.Fatalf("skyrl rows: exit %d\n%s%s", code, stdout, stderr)
	}
	rows, err := skyrl.ReadRows(filepath.Join(rowsDir, "eval.parquet"))
	if err != nil || len(rows) != 200 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}

	for _, c := range []struct {
		policy string
		mean   string // %.3f
		extra  []string
		check  func(t *testing.T, s eval.Summary, recs []eval.Record)
	}{
		{policy: "optimal", mean: "1.000", check: func(t *testing.T, s eval.Summary, recs []eval.Record) {
			for i, r := range recs {
				if *r.Reward != 1 || r.Scores["grade"] != 1 {
					t.Fatalf("rollout %d: %+v", i, r)
				}
			}
			// Each prompt is the row's prompt, byte for byte.
			byTask := map[string]eval.Record{}
			for _, r := range recs {
				byTask[r.TaskID] = r
			}
			for _, row := range rows {
				r := byTask[row.Episode.TaskID]
				if len(r.Messages) < 2 || r.Messages[0].Role != row.Prompt[0].Role || r.Messages[0].Content != row.Prompt[0].Content ||
					r.Messages[1].Role != row.Prompt[1].Role || r.Messages[1].Content != row.Prompt[1].Content {
					t.Fatalf("task %s: eval's prompt is not the row's:\n%q\n%q", row.Episode.TaskID, r.Messages[:2], row.Prompt)
				}
			}
		}},
		{policy: "idle", mean: "0.200", check: func(t *testing.T, s eval.Summary, recs []eval.Record) {
			for i, r := range recs {
				if *r.Reward != 0.2 {
					t.Fatalf("rollout %d: %+v", i, r)
				}
			}
			if s.StdErr != 0 {
				t.Errorf("standard error %v of a constant", s.StdErr)
			}
		}},
		{policy: "greedy", mean: "0.927", extra: []string{"--sft-out", filepath.Join(dir, "sft.parquet"), "--sft-min-reward", "1"},
			check: func(t *testing.T, s eval.Summary, recs []eval.Record) {
				perfect := map[string]eval.Record{}
				for _, r := range recs {
					if *r.Reward >= 1 {
						perfect[r.TaskID] = r
					}
				}
				// docs/gridsim.md: greedy grades 1 on 73 of the 200 days.
				if len(perfect) != 73 || s.SFT == nil || s.SFT.Rows != 73 {
					t.Fatalf("%d perfect rollouts, SFT %+v", len(perfect), s.SFT)
				}
				checkSFT(t, filepath.Join(dir, "sft.parquet"), perfect)
			}},
		{policy: "malformed", mean: "0.000", check: func(t *testing.T, s eval.Summary, recs []eval.Record) {
			if s.UnparsedCalls != 400 || s.ToolCalls != 0 || len(s.UnparsedReasons) != 2 {
				t.Fatalf("%+v", s)
			}
			for _, r := range s.UnparsedReasons {
				if r.Count != 200 || !(strings.HasPrefix(r.Reason, "invalid JSON at offset 51: the JSON ends before the object is complete") ||
					strings.HasPrefix(r.Reason, `call to "submit_schedule": "arguments" is a string`)) {
					t.Errorf("reason %+v", r)
				}
			}
			for _, r := range recs {
				if len(r.Unparsed) != 2 || r.Unparsed[0].Turn != 1 || r.Unparsed[1].Turn != 2 || r.Metrics["unparsed_calls"] != 2 || *r.Reward != 0 {
					t.Fatalf("%s: %+v %v", r.TaskID, r.Unparsed, r.Metrics)
				}
			}
		}},
	} {
		t.Run(c.policy, func(t *testing.T) {
			out := filepath.Join(dir, c.policy+".jsonl")
			stdout, stderr, code := runEvalCmd(t, evalArgs(t, addr, model, c.policy, out, append([]string{"--json", "--concurrency", "32"}, c.extra...)...)...)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s\nserver:\n%s", code, stdout, stderr, srv.log)
			}
			s := decodeSummary(t, stdout, stderr)
			if s.Rollouts != 200 || s.Expected != 200 || s.Scored != 200 || s.Failed != 0 || s.Played != 200 ||
				fmt.Sprintf("%.3f", s.MeanReward) != c.mean || fmt.Sprintf("%.3f", s.Scores["grade"]) != c.mean {
				t.Fatalf("summary %+v, want mean %s", s, c.mean)
			}
			if !strings.Contains(stderr, "200/200 rollouts, mean reward "+c.mean) {
				t.Errorf("no progress on stderr:\n%s", stderr)
			}
			// eval.md's table of the baselines is this run's summary.
			docQuotes(t, "eval.md", fmt.Sprintf("| `%s` | %.3f | %.3f | %d | %d |", c.policy, s.MeanReward, s.StdErr, s.ToolCalls, s.UnparsedCalls))
			recs := readRecords(t, out)
			if len(recs) != 200 {
				t.Fatalf("%d lines", len(recs))
			}
			seen := map[string]bool{}
			var sum float64
			for _, r := range recs {
				// A deploy that ran out of its readiness deadline on a loaded
				// machine is retried, as eval promises: such a record says so.
				if seen[r.TaskID] || r.Split != "eval" || r.Model != c.policy || r.ToolFormat != "hermes" || r.Reward == nil ||
					r.Attempts != 1+len(r.EnvErrors) || r.Failure != nil || len(r.Turns) != 3 || r.Timings.EnvS <= 0 || r.Timings.ModelS <= 0 ||
					r.Timings.WallS < r.Timings.EnvS+r.Timings.ModelS-1e-3 || r.EpisodeID == "" {
					t.Fatalf("record %+v", r)
				}
				seen[r.TaskID] = true
				sum += *r.Reward
			}
			if math.Abs(sum/200-s.MeanReward) > 1e-9 {
				t.Fatalf("mean of the lines %v, summary %v", sum/200, s.MeanReward)
			}
			c.check(t, s, recs)
		})
	}
	if code := srv.signalAndWait(t, syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
}

// checkSFT reads the SFT file with DuckDB: one conversation per perfect
// rollout, as the model played it.
func checkSFT(t *testing.T, file string, perfect map[string]eval.Record) {
	t.Helper()
	var got struct {
		Rows []struct {
			Messages []eval.Message `json:"messages"`
			TaskID   string         `json:"task_id"`
			Reward   float64        `json:"reward"`
		}
	}
	raw := oracles.DuckDBScript(t, filepath.Join("..", "..", "core", "eval", "testdata", "read_sft.js"), file)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Rows) != len(perfect) {
		t.Fatalf("%d rows, want %d", len(got.Rows), len(perfect))
	}
	prev := ""
	for _, row := range got.Rows {
		r, ok := perfect[row.TaskID]
		if !ok || row.Reward != 1 || row.TaskID <= prev {
			t.Fatalf("row %s (reward %v) out of place", row.TaskID, row.Reward)
		}
		prev = row.TaskID
		m := row.Messages
		roles := []string{}
		for _, x := range m {
			roles = append(roles, x.Role)
		}
		if strings.Join(roles, ",") != "system,user,assistant,tool,assistant,tool,assistant" {
			t.Fatalf("%s: roles %v", row.TaskID, roles)
		}
		for i := range m {
			if m[i] != r.Messages[i] {
				t.Fatalf("%s message %d: %q, the rollout has %q", row.TaskID, i, m[i], r.Messages[i])
			}
		}
		if !strings.Contains(m[0].Content, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_prices\"") ||
			m[2].Content != "<tool_call>\n{\"name\": \"get_prices\", \"arguments\": {}}\n</tool_call>" ||
			!strings.Contains(m[3].Content, `"prices":[`) ||
			!strings.HasPrefix(m[4].Content, "<tool_call>\n{\"name\": \"submit_schedule\", \"arguments\": {\"schedule\": [") ||
			!strings.HasPrefix(m[5].Content, "Schedule accepted") || m[6].Content != "The schedule is submitted." {
			t.Fatalf("%s: %q", row.TaskID, m)
		}
	}
}

// qwen3_coder end to end: the policy server writes Qwen3-Coder calls, the
// prompt shows the tools in the Qwen3-Coder layout, the server reads them.
func TestEvalQwen3Coder(t *testing.T) {
	addr := freeAddr(t)
	startServe(t, gridsimBundle, addr, t.TempDir(), nil)
	model := startPolicy(t, "--tool-format", "qwen3_coder")
	// A tokenizer folder whose chat template lays tools out as Qwen3-Coder's.
	tok := t.TempDir()
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(oracles.Qwen3Dir(t), f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(tok, f), b, 0o644)
	}
	tmpl, err := os.ReadFile(filepath.Join("..", "..", "core", "dataset", "skyrl", "testdata", "coder_layout.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(tok, "chat_template.jinja"), tmpl, 0o644)
	dir := t.TempDir()
	run := func(policy, limit, format string) (eval.Summary, []eval.Record) {
		out := filepath.Join(dir, policy+".jsonl")
		stdout, stderr, code := runEvalCmd(t, "http://"+addr, "--model-url", model, "--model", policy, "--tokenizer", tok,
			"--tool-format", format, "--limit", limit, "--out", out, "--json")
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		return decodeSummary(t, stdout, stderr), readRecords(t, out)
	}
	// Another name of the format (the registry's alias) is the format.
	s, recs := run("optimal", "10", "qwen3-coder")
	if s.Rollouts != 10 || s.MeanReward != 1 || s.ToolCalls != 20 || s.ToolFormat != "qwen3_coder" || recs[0].ToolFormat != "qwen3_coder" {
		t.Fatalf("%+v", s)
	}
	if sys := recs[0].Messages[0].Content; !strings.Contains(sys, "<tools>\n<function>\n<name>get_prices</name>") {
		t.Fatalf("system prompt:\n%s", sys)
	}
	if a := recs[0].Messages[2].Content; a != "<tool_call>\n<function=get_prices>\n</function>\n</tool_call>" {
		t.Fatalf("first reply %q", a)
	}
	s, _ = run("malformed", "3", "qwen3_coder")
	if s.UnparsedCalls != 6 || s.MeanReward != 0 || len(s.UnparsedReasons) != 2 ||
		!strings.Contains(s.UnparsedReasons[0].Reason+s.UnparsedReasons[1].Reason, "(this format does not take JSON calls)") {
		t.Fatalf("%+v", s)
	}
}
