package inbox_test

// End to end: the real agentenv binary serves this bundle (the process
// sandbox runs the real env binary, the plugins run as real subprocesses)
// with --tool-format qwen3_coder --reward mean, and the policies play it
// over the OpenEnv WebSocket protocol, as a trainer's rollouts would.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/client"
	"github.com/agentenv/agentenv/examples/inbox/policy"
	"github.com/agentenv/agentenv/examples/inbox/rollout"
	"github.com/agentenv/agentenv/internal/servetest"
)

func TestMain(m *testing.M) { os.Exit(servetest.Main(m)) }

// playBin builds inbox-play, once per run.
func playBin(t *testing.T) string {
	t.Helper()
	return servetest.Build(t, "github.com/agentenv/agentenv/examples/inbox/cmd/inbox-play", "")
}

// `agentenv bundle check` accepts the bundle as it is, and under the reward
// the README serves it with.
func TestBundleCheck(t *testing.T) {
	agentenvBin := servetest.Binary(t)
	out, err := exec.Command(agentenvBin, "bundle", "check", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("agentenv bundle check: %v\n%s", err, out)
	}
	for _, want := range []string{
		"bundle inbox\n  Inbox: two questions at a time about a synthetic mailbox",
		"inbox  image agentenv-inbox-env:1, command bin/inbox-env",
		"all    35 tasks  1 toolset", "eval   5 tasks   1 toolset", "train  30 tasks  1 toolset",
		"35 tasks  envs inbox; turns: default | default; +end_turn",
		"needs a reward",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("bundle check output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "warning") {
		t.Errorf("bundle check warns:\n%s", out)
	}
	out, err = exec.Command(agentenvBin, "bundle", "check", ".", "--reward", "mean").CombinedOutput()
	if err != nil || strings.Contains(string(out), "needs a reward") {
		t.Fatalf("agentenv bundle check --reward mean: %v\n%s", err, out)
	}
}

// served is one `agentenv serve` of this bundle.
type served struct {
	*servetest.Server
	url, state string
}

// serve starts the server as the README does, on a free port, with its
// sandboxes' state in a folder of the test's, and waits until it is
// healthy. Cleanup kills it and any env process it left.
func serve(t *testing.T) *served {
	t.Helper()
	s := servetest.Start(t, servetest.Options{Bundle: ".", StateDir: t.TempDir(),
		Args: []string{"--reward", "mean", "--tool-format", "qwen3_coder", "--max-concurrent-envs", "4"}})
	return &served{Server: s, url: s.URL, state: s.StateDir}
}

// stop sends SIGTERM and wants a clean exit with every env torn down.
func (s *served) stop(t *testing.T) {
	t.Helper()
	if code := s.Stop(t, syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM:\n%s", code, s.Log)
	}
	if left, _ := filepath.Glob(filepath.Join(s.state, "*.json")); len(left) > 0 {
		t.Fatalf("sandboxes left after SIGTERM: %v", left)
	}
}

// prompts reads the two questions of a task file.
func prompts(t *testing.T, name string) [2]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("tasks", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var steps []struct{ ID, Prompt string }
	if err := json.Unmarshal(b, &steps); err != nil {
		t.Fatal(err)
	}
	var p [2]string
	for _, s := range steps {
		if s.ID == "ask-1" || s.ID == "ask-2" {
			p[s.ID[4]-'1'] = s.Prompt
		}
	}
	return p
}

// toolCalls counts the replies that call a tool of the env (end_turn is
// not one: the engine does not count it).
func toolCalls(transcript []rollout.Message) (calls, replies int) {
	for _, m := range transcript {
		if m.Role != "assistant" {
			continue
		}
		replies++
		if strings.Contains(m.Content, "<function=") && !strings.Contains(m.Content, "<function=end_turn>") {
			calls++
		}
	}
	return calls, replies
}

func TestServeEndToEnd(t *testing.T) {
	s := serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	t.Run("catalogue", func(t *testing.T) {
		for split, want := range map[string]int{"all": 35, "eval": 5, "train": 30} {
			ids, err := rollout.Tasks(ctx, s.url, "", split)
			if err != nil || len(ids) != want {
				t.Fatalf("split %s: %v, %v", split, ids, err)
			}
		}
		eval, _ := rollout.Tasks(ctx, s.url, "", "eval")
		if strings.Join(eval, ",") != "acme-invoice,lisbon-trip,offsite,refund,spam" {
			t.Fatalf("eval = %v", eval)
		}
		if _, err := rollout.Tasks(ctx, s.url, "", "test"); !errors.Is(err, client.CodeNotFound) || !strings.Contains(err.Error(), `no split "test"`) {
			t.Fatalf("an unknown split: %v", err)
		}
	})

	// The README's table: each policy over the eval split and three train
	// tasks. The server's --tool-format reads the replies: no reset names
	// a format.
	type want struct{ reward, answer1, answer2 float64 }
	wants := map[policy.Shape]want{
		policy.Scripted: {1, 1, 1},
		policy.Wrong:    {0.5, 0, 1},
		// A reply without a tool call ends its turn and the turns after
		// it, as on the SkyRL page: the second question is never asked.
		policy.Reply: {0.5, 1, 0},
	}
	tasks := []string{"acme-invoice", "lisbon-trip", "offsite", "refund", "spam", "invoice/globex-jul", "invoice/hooli-nov", "invoice/wayne-sep"}
	for _, shape := range policy.Shapes {
		t.Run(string(shape), func(t *testing.T) {
			w := wants[shape]
			// Every task needs two calls for both questions; the reply
			// policy plays only the first, which spam answers with one.
			minCalls := 2
			if shape == policy.Reply {
				minCalls = 1
			}
			for _, id := range tasks {
				res, err := rollout.Play(ctx, s.url, "", rollout.Reset{TaskID: id}, policy.New(shape))
				if err != nil {
					t.Fatal(err)
				}
				m := res.Metrics
				calls, replies := toolCalls(res.Transcript)
				if res.Reward != w.reward || m["score/answer-1"] != w.answer1 || m["score/answer-2"] != w.answer2 {
					t.Errorf("%s: reward %v, metrics %v; want %+v\n%s", id, res.Reward, m, w, rollout.Render(res.Transcript))
				}
				if _, ok := m["score/answer-2"]; !ok {
					t.Errorf("%s: no score/answer-2 in %v", id, m)
				}
				if m["unparsed_calls"] != 0 || m["invalid_calls"] != 0 || m["tool_errors"] != 0 || m["failed"] != 0 ||
					m["tool_calls"] != float64(calls) || m["turns"] != float64(replies) || calls < minCalls {
					t.Errorf("%s: metrics %v, the policy made %d calls in %d replies", id, m, calls, replies)
				}
				if shape == policy.Reply {
					// The plain reply was the last message: the episode
					// was done at it, with nothing more to say.
					last := res.Transcript[len(res.Transcript)-1]
					if last.Role != "assistant" || !strings.HasPrefix(last.Content, "The answer is ") {
						t.Errorf("%s: the rollout goes on after the plain reply:\n%s", id, rollout.Render(res.Transcript))
					}
				}
				if strings.HasPrefix(id, "invoice/") {
					continue
				}
				// The second question reaches the policy as end_turn's
				// result, and only so.
				second := prompts(t, id)[1]
				found := false
				for _, msg := range res.Transcript {
					if msg.Content == second && msg.Role == "tool" {
						found = true
					} else if strings.Contains(msg.Content, second) {
						t.Errorf("%s: the second question came as a %s message:\n%s", id, msg.Role, rollout.Render(res.Transcript))
					}
				}
				if found == (shape == policy.Reply) {
					t.Errorf("%s: the second question sent as end_turn's result: %v, want %v:\n%s", id, found, !found, rollout.Render(res.Transcript))
				}
			}
		})
	}

	// The other way score/answer-2 = 0 comes about: the trainer's turn cap
	// (the reset's max_turns) ends the rollout at the end_turn that answers
	// the first question, so its result closes the episode instead of
	// asking the second question, and the second turn never opens.
	t.Run("scripted under a turn cap", func(t *testing.T) {
		res, err := rollout.Play(ctx, s.url, "", rollout.Reset{TaskID: "acme-invoice", MaxTurns: 3}, policy.New(policy.Scripted))
		if err != nil {
			t.Fatal(err)
		}
		m := res.Metrics
		if res.Reward != 0.5 || m["score/answer-1"] != 1 || m["score/answer-2"] != 0 || m["turns"] != 3 || m["unparsed_calls"] != 0 {
			t.Fatalf("reward %v, metrics %v\n%s", res.Reward, m, rollout.Render(res.Transcript))
		}
		second := prompts(t, "acme-invoice")[1]
		for _, msg := range res.Transcript {
			if strings.Contains(msg.Content, second) {
				t.Fatalf("the second question was sent: %+v", msg)
			}
		}
		if last := res.Transcript[len(res.Transcript)-1]; last != (rollout.Message{Role: "tool", Content: "The episode is over."}) {
			t.Fatalf("end_turn's result under the cap: %+v", last)
		}
	})

	t.Run("replies in another format are answered, and counted unparsed", func(t *testing.T) {
		c, err := rollout.Dial(ctx, s.url, "")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		obs, err := c.Reset(ctx, rollout.Reset{TaskID: "acme-invoice"})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range obs.Tools {
			names = append(names, tool.Function.Name)
		}
		if got := strings.Join(names, ","); got != "list_folders,read_email,search_emails,end_turn" {
			t.Fatalf("tools offered: %s", got)
		}
		obs, err = c.Step(ctx, "<tool_call>\n{\"name\": \"search_emails\", \"arguments\": {\"query\": \"acme\"}}\n</tool_call><|im_end|>")
		if err != nil || len(obs.Messages) != 1 || !strings.HasPrefix(obs.Messages[0].Content, "Error: this tool call could not be read") {
			t.Fatalf("a hermes call: %+v, %v", obs, err)
		}
		// The unread call left the turn open; a plain reply ends it and
		// the episode: the second question is never asked.
		if obs, err = c.Step(ctx, "INV-1042"); err != nil {
			t.Fatal(err)
		}
		m := obs.Metrics
		if !obs.Done || obs.Reward == nil || *obs.Reward != 0.5 || len(obs.Messages) != 0 || m["unparsed_calls"] != 1 ||
			m["tool_calls"] != 0 || m["turns"] != 2 || m["score/answer-1"] != 1 || m["score/answer-2"] != 0 {
			t.Fatalf("final: done %v, reward %v, messages %v, metrics %v", obs.Done, obs.Reward, obs.Messages, m)
		}
		_, err = c.Step(ctx, "1,284.50")
		var se *client.Error
		if !errors.As(err, &se) || se.Code != client.CodeNoEpisode || !strings.Contains(se.Message, "the episode is done") {
			t.Fatalf("a step after done: %v", err)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, c := range []struct {
			reset rollout.Reset
			code  string
		}{
			{rollout.Reset{TaskID: "nosuch"}, "NOT_FOUND"},
			{rollout.Reset{TaskID: "spam", ToolFormat: "nosuch"}, "VALIDATION_ERROR"},
		} {
			_, err := rollout.Play(ctx, s.url, "", c.reset, policy.New(policy.Scripted))
			var se *client.Error
			if !errors.As(err, &se) || string(se.Code) != c.code {
				t.Errorf("reset %+v: %v, want %s", c.reset, err, c.code)
			}
		}
	})

	// The README's table and rollout are what inbox-play prints.
	t.Run("inbox-play matches the docs", func(t *testing.T) {
		readme, err := os.ReadFile("README.md")
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(ctx, playBin(t), "--url", s.url, "--policy", "all").CombinedOutput()
		if err != nil {
			t.Fatalf("inbox-play: %v\n%s", err, out)
		}
		rows := 0
		for _, line := range strings.Split(string(readme), "\n") {
			if strings.HasPrefix(line, "| scripted |") || strings.HasPrefix(line, "| reply |") || strings.HasPrefix(line, "| wrong |") {
				rows++
				if !strings.Contains(string(out), line+"\n") {
					t.Errorf("inbox-play prints no README row %q:\n%s", line, out)
				}
			}
		}
		if rows != 3 {
			t.Fatalf("the README has %d policy rows, want 3", rows)
		}

		// docs/inbox.md's policy table: its reward and scores columns are
		// inbox-play's, rounded.
		docs, err := os.ReadFile(filepath.Join("..", "..", "docs", "inbox.md"))
		if err != nil {
			t.Fatal(err)
		}
		rows = 0
		for _, line := range strings.Split(string(docs), "\n") {
			for _, shape := range policy.Shapes {
				if !strings.HasPrefix(line, "| `"+string(shape)+"` |") {
					continue
				}
				rows++
				cells := strings.Split(strings.Trim(line, "| "), " | ")
				printed := tableRow(string(out), string(shape))
				if len(cells) != 5 || len(printed) != 7 {
					t.Fatalf("docs/inbox.md row %q or inbox-play's row %q is not as expected", line, printed)
				}
				for i, col := range []int{2, 3, 4} {
					doc, err1 := strconv.ParseFloat(cells[2+i], 64)
					got, err2 := strconv.ParseFloat(printed[col], 64)
					if err1 != nil || err2 != nil || doc != got {
						t.Errorf("docs/inbox.md row %q: column %d is %s; inbox-play prints %s", line, 3+i, cells[2+i], printed[col])
					}
				}
			}
		}
		if rows != len(policy.Shapes) {
			t.Fatalf("docs/inbox.md has %d policy rows, want %d", rows, len(policy.Shapes))
		}

		// Its excerpt of the reply policy's rollout.
		out, err = exec.CommandContext(ctx, playBin(t), "--url", s.url, "--policy", "reply", "--task", "acme-invoice", "--show").CombinedOutput()
		if block := textBlock(string(docs), "## Answering in a reply"); err != nil || len(block) < 100 || !strings.Contains(string(out), block) {
			t.Errorf("inbox-play --policy reply --show does not print docs/inbox.md's excerpt %q: %v\n%s", block, err, out)
		}

		// Its row for the scripted policy under a turn cap.
		out, err = exec.CommandContext(ctx, playBin(t), "--url", s.url, "--policy", "scripted", "--task", "acme-invoice", "--max-turns", "3").CombinedOutput()
		row := strings.TrimPrefix(string(out), "| policy | tasks | reward | score/answer-1 | score/answer-2 | tool calls | unparsed calls |\n|---|---|---|---|---|---|---|\n")
		if err != nil || !strings.Contains(string(docs), "```\n"+row+"```\n") {
			t.Errorf("inbox-play --max-turns 3 printed a row docs/inbox.md does not show: %v\n%s", err, out)
		}

		out, err = exec.CommandContext(ctx, playBin(t), "--url", s.url, "--task", "acme-invoice", "--show").CombinedOutput()
		if err != nil {
			t.Fatalf("inbox-play --show: %v\n%s", err, out)
		}
		block := textBlock(string(readme), "## What a rollout looks like")
		// The README leaves the system prompt out.
		shown := string(out)
		if i, j := strings.Index(shown, "[system]\n"), strings.Index(shown, "[user]\n"); i >= 0 && j > i {
			shown = shown[:i] + shown[j:]
		}
		if len(block) < 500 || !strings.Contains(shown, block) {
			t.Fatalf("inbox-play --show does not print the README's rollout; it printed:\n%s", out)
		}
	})

	s.stop(t)
}

// textBlock is the first ```text block after heading in doc.
func textBlock(doc, heading string) string {
	_, block, _ := strings.Cut(doc, heading)
	_, block, _ = strings.Cut(block, "```text\n")
	block, _, _ = strings.Cut(block, "```")
	return block
}

// tableRow is the cells of the row inbox-play printed for a policy.
func tableRow(out, shape string) []string {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "| "+shape+" |") {
			return strings.Split(strings.Trim(line, "| "), " | ")
		}
	}
	return nil
}
