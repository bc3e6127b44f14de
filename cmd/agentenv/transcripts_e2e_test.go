package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/agentenv/agentenv/client"
	"github.com/agentenv/agentenv/core/dataset/skyrl/oracles"
	"github.com/agentenv/agentenv/core/transcript"
)

var unreadableCall = "<tool_call>\n{\"name\": \"get_prices\", \"arguments\": {\n</tool_call>"

// playDay plays a GridSim eval day with the Go client: replies in order,
// until done. It returns the episode id and the final result.
func playDay(t *testing.T, s *served, index int, replies ...string) (string, client.Result) {
	t.Helper()
	ctx := ctxFor(t, 3*time.Minute)
	sess := mustDial(t, s.URL, client.Options{})
	res, err := sess.Reset(ctx, client.ResetRequest{Split: "eval", Index: index})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Observation.EpisodeID
	for _, r := range replies {
		if res, err = sess.Step(ctx, r); err != nil {
			t.Fatalf("step %.40q: %v", r, err)
		}
	}
	if !res.Done {
		t.Fatalf("episode %s not done after %d replies", id, len(replies))
	}
	return id, res
}

// waitMetric waits until series reaches want on /metrics (the recorder
// writes after the episode's teardown, which the final observation does
// not wait for).
func waitMetric(t *testing.T, s *served, series string, want float64) string {
	t.Helper()
	var text string
	wait.For(t, fmt.Sprintf("%s to reach %v", series, want), func() error {
		if text = metricsText(t, s.addr, ""); metric(text, series) != want {
			return fmt.Errorf("/metrics:\n%s", text)
		}
		return nil
	})
	return text
}

func runAgentenv(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(agentenv(t), args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// serve --record on GridSim, played by the Go client: every ended episode
// is one line of the day's file, with the replies, the calls read and
// unreadable, what the env answered, scores and times; agentenv
// transcripts lists, filters, shows and exports them, and DuckDB reads
// the export.
func TestServeRecordTranscripts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs")
	s := startServe(t, gridsimBundle, freeAddr(t), t.TempDir(), nil, "--record", dir)

	first, res := playDay(t, s, 0, "Let me look first.\n"+unreadableCall, strings.ReplaceAll(strings.ReplaceAll(idleSchedule, `\n`, "\n"), `\"`, `"`), "I am done.")
	if res.Reward == nil {
		t.Fatal("no reward")
	}
	second, _ := playDay(t, s, 1, strings.ReplaceAll(strings.ReplaceAll(idleSchedule, `\n`, "\n"), `\"`, `"`), "Done.")
	// A third is closed before it ends: abandoned, recorded too.
	ctx := ctxFor(t, time.Minute)
	sess := mustDial(t, s.URL, client.Options{})
	r3, err := sess.Reset(ctx, client.ResetRequest{Split: "eval", Index: 2})
	if err != nil {
		t.Fatal(err)
	}
	sess.Close()
	text := waitMetric(t, s, "agentenv_transcripts_recorded_total", 3)
	if metric(text, "agentenv_transcripts_dropped_total") != 0 || metric(text, "agentenv_transcripts_failed_total") != 0 || metric(text, "agentenv_transcripts_recording") != 1 {
		t.Errorf("transcript metrics:\n%s", text)
	}
	// A fourth is in play when the server stops: the drain ends it, and
	// it is recorded before the server exits.
	live := mustDial(t, s.URL, client.Options{})
	r4, err := live.Reset(ctx, client.ResetRequest{Split: "eval", Index: 3})
	if err != nil {
		t.Fatal(err)
	}
	if code := s.signalAndWait(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.log)
	}

	// The file: one line per episode, in the day's file.
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) != 1 || filepath.Base(files[0]) != time.Now().UTC().Format(time.DateOnly)+".jsonl" {
		t.Fatalf("files %v %v", files, err)
	}
	recs := map[string]*transcript.Record{}
	if _, err := transcript.Read([]string{dir}, func(r *transcript.Record) error { recs[r.EpisodeID] = r; return nil }); err != nil {
		t.Fatal(err)
	}
	a, b, c, d := recs[first], recs[second], recs[r3.Observation.EpisodeID], recs[r4.Observation.EpisodeID]
	if len(recs) != 4 || a == nil || b == nil || c == nil || d == nil {
		t.Fatalf("records %v", recs)
	}
	if d.Outcome != "abandoned" || d.Cause != "server_shutdown" {
		t.Errorf("the episode the drain ended: %s %s", d.Outcome, d.Cause)
	}
	if a.TaskID != "day/eval-001" || a.Split != "eval" || a.Index == nil || *a.Index != 0 || a.Outcome != "done" || a.Cause != "completed" ||
		*a.Reward != *res.Reward || a.Scores["grade"] != *res.Reward || a.ToolFormat != "hermes" || a.Sandbox != "local" {
		t.Errorf("record of the first episode: %+v", a)
	}
	if len(a.Prompt) != 2 || len(a.Tools) != 2 || a.Tools[0].Name != "get_prices" || len(a.Turns) != 3 {
		t.Fatalf("prompt %+v tools %+v turns %d", a.Prompt, a.Tools, len(a.Turns))
	}
	if u := a.Turns[0].Unparsed; len(u) != 1 || u[0].Reason == "" || !strings.Contains(a.Turns[0].Messages[0].Content, "could not be read") {
		t.Errorf("turn 1: unparsed %+v messages %+v", u, a.Turns[0].Messages)
	}
	if calls := a.Turns[1].Calls; len(calls) != 1 || calls[0].Name != "submit_schedule" || len(a.Turns[1].Messages) != 1 || a.Turns[1].StepS <= 0 {
		t.Errorf("turn 2: %+v", a.Turns[1])
	}
	if a.Times["deploy"] <= 0 || a.Times["tool"] <= 0 || a.Times["teardown"] <= 0 || a.Ended.Before(a.Started) {
		t.Errorf("times %v started %v ended %v", a.Times, a.Started, a.Ended)
	}
	if c.Outcome != "abandoned" || c.Cause != "client_closed" || c.Reward != nil || len(c.Turns) != 0 || len(c.Prompt) != 2 {
		t.Errorf("the abandoned episode: %+v", c)
	}

	// list, filtered.
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"all", nil, []string{first, second, r3.Observation.EpisodeID, r4.Observation.EpisodeID}},
		{"done", []string{"--outcome", "done"}, []string{first, second}},
		{"abandoned", []string{"--outcome", "abandoned"}, []string{r3.Observation.EpisodeID, r4.Observation.EpisodeID}},
		{"cause", []string{"--cause", "server_shutdown"}, []string{r4.Observation.EpisodeID}},
		{"task glob", []string{"--task", "day/*-002"}, []string{second}},
		{"reward range", []string{"--min-reward", "0", "--max-reward", "1"}, []string{first, second}},
		{"reward over", []string{"--min-reward", "1.5"}, nil},
		{"split", []string{"--split", "train"}, nil},
	} {
		t.Run("list "+tc.name, func(t *testing.T) {
			out, stderr, err := runAgentenv(t, append([]string{"transcripts", "list", dir, "--json"}, tc.args...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				var r transcript.Record
				if line != "" && json.Unmarshal([]byte(line), &r) == nil {
					got = append(got, r.EpisodeID)
				}
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	table, _, err := runAgentenv(t, "transcripts", "list", dir)
	if err != nil || !strings.Contains(table, first) || !strings.Contains(table, "client_closed") || !strings.Contains(table, "day/eval-001") {
		t.Errorf("table: %v\n%s", err, table)
	}
	if _, stderr, err := runAgentenv(t, "transcripts", "list", dir, "--outcome", "won"); err == nil || !strings.Contains(stderr, `--outcome "won": want done, failed or abandoned`) {
		t.Errorf("a bad outcome: %v %s", err, stderr)
	}

	// show: the conversation.
	shown, stderr, err := runAgentenv(t, "transcripts", "show", dir, "--episode", first)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{"episode " + first, "task day/eval-001 (split eval, index 0)", "done (completed, none)", "── system", "── user",
		"── assistant (turn 1,", "Let me look first.", "▸ call unreadable:", "▸ call read: submit_schedule", "── tool", "could not be read", "I am done."} {
		if !strings.Contains(shown, want) {
			t.Errorf("show lacks %q:\n%s", want, shown)
		}
	}

	// sft: the good ones, tools in the system message, read by DuckDB.
	out := filepath.Join(t.TempDir(), "sft.parquet")
	said, stderr, err := runAgentenv(t, "transcripts", "sft", dir, "--min-reward", "0", "--out", out, "--tokenizer", oracles.Qwen3Dir(t),
		"--chat-template-kwargs", `{"enable_thinking": false}`)
	if err != nil || !strings.Contains(said, "2 episodes") {
		t.Fatalf("sft: %v\n%s\n%s", err, said, stderr)
	}
	var got struct {
		Rows []struct {
			Messages []struct{ Role, Content string }
			TaskID   string `json:"task_id"`
			Sample   string
			Reward   float64
		}
		Metadata []struct{ Key, Value string }
	}
	raw := oracles.DuckDBScript(t, filepath.Join("..", "..", "core", "eval", "testdata", "read_sft.js"), out)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if len(got.Rows) != 2 || got.Rows[0].TaskID != "day/eval-001" || got.Rows[1].TaskID != "day/eval-002" || got.Rows[0].Reward != *res.Reward {
		t.Fatalf("rows %+v", got.Rows)
	}
	msgs := got.Rows[0].Messages
	if len(msgs) != 2+2*2+1 || msgs[0].Role != "system" || !strings.Contains(msgs[0].Content, "submit_schedule") || msgs[len(msgs)-1].Content != "I am done." {
		t.Errorf("first row's messages (system with tools, replies and answers up to the last reply): %+v", msgs)
	}
	if _, stderr, err := runAgentenv(t, "transcripts", "sft", dir, "--out", filepath.Join(t.TempDir(), "none.parquet")); err == nil || !strings.Contains(stderr, "none scored 1 or more") {
		t.Errorf("sft with no episode over the default reward 1: %v %s", err, stderr)
	}
}

// A --record directory that cannot be written refuses the start, naming
// it and the flag; a full disk stops the recording with one error line
// and a counter, and the server plays on.
func TestServeRecordBadDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(file, "runs")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	outb, err := exec.CommandContext(ctx, agentenv(t), "serve", gridsimBundle, "--addr", "127.0.0.1:0", "--record", bad,
		"--sandbox-config", "state_dir="+t.TempDir(), "--sandbox-config", "mode=process").CombinedOutput()
	if out := string(outb); err == nil || ctx.Err() != nil || !strings.Contains(out, "--record "+bad) || !strings.Contains(out, "give a directory agentenv can write to") {
		t.Fatalf("got %v, want a refusal naming --record %s:\n%s", err, bad, out)
	}

	// Full: today's and tomorrow's files are /dev/full (every write: ENOSPC).
	dir := t.TempDir()
	for _, d := range []time.Time{time.Now(), time.Now().Add(24 * time.Hour)} {
		if err := os.Symlink("/dev/full", filepath.Join(dir, transcript.FileName(d.UTC().Format(time.DateOnly), 0))); err != nil {
			t.Fatal(err)
		}
	}
	s := startServe(t, gridsimBundle, freeAddr(t), t.TempDir(), nil, "--record", dir)
	idle := strings.ReplaceAll(strings.ReplaceAll(idleSchedule, `\n`, "\n"), `\"`, `"`)
	for i := 0; i < 3; i++ {
		playDay(t, s, i, idle, "Done.")
	}
	text := waitMetric(t, s, "agentenv_transcripts_failed_total", 3)
	if metric(text, "agentenv_transcripts_recording") != 0 || metric(text, "agentenv_transcripts_recorded_total") != 0 || metric(text, `agentenv_episodes_total{outcome="done"}`) != 3 {
		t.Errorf("metrics:\n%s", text)
	}
	if n := strings.Count(s.log.String(), "a write failed; recording stopped"); n != 1 {
		t.Errorf("%d error lines about the failed write, want 1:\n%s", n, s.log)
	}
	if code := s.signalAndWait(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, s.log)
	}
}
