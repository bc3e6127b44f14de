package policy

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentenv/agentenv/examples/inbox/inboxenv"
	"github.com/agentenv/agentenv/examples/inbox/mailbox"
	"github.com/agentenv/agentenv/examples/inbox/rollout"
)

// task is what the policy test needs of a task file: its two prompts and
// the verifiers' patterns.
type task struct {
	id       string
	prompts  [2]string
	patterns [2]string
}

// readTask reads tasks/<name>.json of the bundle.
func readTask(t *testing.T, name string) task {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "tasks", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var steps []struct{ ID, Prompt, Pattern string }
	if err := json.Unmarshal(b, &steps); err != nil {
		t.Fatal(err)
	}
	tk := task{id: name}
	for _, s := range steps {
		switch s.ID {
		case "ask-1", "ask-2":
			tk.prompts[s.ID[4]-'1'] = s.Prompt
		case "answer-1", "answer-2":
			tk.patterns[s.ID[7]-'1'] = s.Pattern
		}
	}
	if tk.prompts[1] == "" || tk.patterns[1] == "" {
		t.Fatalf("%s: steps ask-1, ask-2, answer-1, answer-2 not all there", name)
	}
	return tk
}

// env serves box's tools in-process over MCP: the env's own tool code,
// without the HTTP.
func env(t *testing.T, box *mailbox.Mailbox) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := inboxenv.New(box, nil).Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "policy-test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// play runs the policy's actions on the env and returns its answers and
// how many tool calls it made, as the server plays it: end_turn ends a
// turn and asks the next question; a plain reply ends the episode.
func play(t *testing.T, cs *mcp.ClientSession, shape Shape, tk task) ([]string, int) {
	t.Helper()
	p, err := New(shape)(rollout.Observation{TaskID: tk.id, Messages: []rollout.Message{{Role: "system", Content: "sys"}, {Role: "user", Content: tk.prompts[0]}}})
	if err != nil {
		t.Fatal(err)
	}
	var answers []string
	calls := 0
	obs := rollout.Observation{}
	for len(answers) < 2 {
		if calls > 10 {
			t.Fatalf("%s: still calling tools after %d calls", tk.id, calls)
		}
		a, err := p.(*player).next(obs)
		if err != nil {
			t.Fatalf("%s: %v", tk.id, err)
		}
		if a.Tool == "" {
			return append(answers, a.Value), calls
		}
		if a.Tool == "end_turn" {
			answers = append(answers, a.Value)
			obs = rollout.Observation{Messages: []rollout.Message{{Role: "tool", Content: tk.prompts[1]}}}
			continue
		}
		calls++
		args := map[string]any{}
		if a.Param != "" {
			args[a.Param] = a.Value
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: a.Tool, Arguments: args})
		cancel()
		if err != nil || res.IsError {
			t.Fatalf("%s: %s(%v): %v %+v", tk.id, a.Tool, args, err, res)
		}
		obs = rollout.Observation{Messages: []rollout.Message{{Role: "tool", Content: res.Content[0].(*mcp.TextContent).Text}}}
	}
	return answers, calls
}

var handWritten = []string{"acme-invoice", "lisbon-trip", "offsite", "refund", "spam"}

// On mailboxes of many seeds, the scripted policy finds every answer in
// the env's tool answers, and the tasks' own patterns accept it: the
// scripts do not lean on one seed's ids or order. The failure shapes
// answer as they say.
func TestScriptsAnswerOnEverySeed(t *testing.T) {
	var tasks []task
	for _, name := range handWritten {
		tasks = append(tasks, readTask(t, name))
	}
	family := readTask(t, "invoice")
	for _, seed := range []uint64{mailbox.DefaultSeed, 1, 2, 3, 4, 5} {
		box, lines, err := mailbox.Generate(seed)
		if err != nil {
			t.Fatal(err)
		}
		cs := env(t, &box)
		all := tasks
		for _, l := range lines {
			all = append(all, task{
				id:       "invoice/" + l.ID,
				prompts:  [2]string{strings.NewReplacer("<vendor>", l.Vendor, "<month>", l.Month).Replace(family.prompts[0]), family.prompts[1]},
				patterns: [2]string{l.NumberPattern, l.AmountPattern},
			})
		}
		for _, tk := range all {
			answers, calls := play(t, cs, Scripted, tk)
			for i, a := range answers {
				if !regexp.MustCompile(tk.patterns[i]).MatchString(a) {
					t.Errorf("seed %d, %s: answer %d %q does not match %s", seed, tk.id, i+1, a, tk.patterns[i])
				}
			}
			if calls < 1 {
				t.Errorf("seed %d, %s: answered without a tool call", seed, tk.id)
			}
			wrong, _ := play(t, cs, Wrong, tk)
			if wrong[0] != WrongAnswer || wrong[1] != answers[1] || regexp.MustCompile(tk.patterns[0]).MatchString(WrongAnswer) {
				t.Errorf("seed %d, %s: the wrong policy answered %q", seed, tk.id, wrong)
			}
			if reply, _ := play(t, cs, Reply, tk); len(reply) != 1 || reply[0] != "The answer is "+answers[0]+"." {
				t.Errorf("seed %d, %s: the reply policy answered %q", seed, tk.id, reply)
			}
		}
	}
}

func TestScriptRefusals(t *testing.T) {
	for _, c := range []struct{ id, prompt, want string }{
		{"nosuch", "Hi", "no script for task nosuch"},
		{"invoice/x", "What is the weather?", "does not ask for a vendor's invoice"},
	} {
		if _, err := Script(c.id, c.prompt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Script(%q, %q) = %v, want %q", c.id, c.prompt, err, c.want)
		}
	}
	if _, err := ParseShape("greedy"); err == nil || !strings.Contains(err.Error(), "scripted, reply, wrong") {
		t.Errorf("ParseShape(greedy) = %v", err)
	}
	// A tool answer the policy cannot use fails it, naming what it got.
	p := &player{shape: Scripted, turns: scripts["acme-invoice"]}
	if _, err := p.next(rollout.Observation{}); err != nil {
		t.Fatal(err)
	}
	for _, obs := range []rollout.Observation{
		{Messages: []rollout.Message{{Role: "tool", Content: "Error: no tool"}}},
		{Messages: []rollout.Message{{Role: "tool", Content: "[]"}, {Role: "tool", Content: "[]"}}},
		{Messages: []rollout.Message{{Role: "tool", Content: "No email holds every word"}}},
		{Messages: []rollout.Message{{Role: "tool", Content: `[{"id":"m-1","subject":"Lunch"}]`}}},
	} {
		if _, err := p.next(obs); err == nil {
			t.Errorf("next(%+v) accepted it", obs.Messages)
		}
	}
	// Asked for a reply after its plain reply (which ends the episode),
	// the reply policy refuses rather than play a turn that never opens.
	r := &player{shape: Reply, turns: scripts["spam"]}
	if a, err := r.next(rollout.Observation{}); err != nil || a.Tool != "list_folders" {
		t.Fatalf("first action %+v, %v", a, err)
	}
	a, err := r.next(rollout.Observation{Messages: []rollout.Message{{Role: "tool", Content: `[{"folder":"spam","emails":9}]`}}})
	if err != nil || a != (Action{Value: "The answer is 9."}) {
		t.Fatalf("the plain reply: %+v, %v", a, err)
	}
	if _, err := r.next(rollout.Observation{}); err == nil || !strings.Contains(err.Error(), "after a plain reply") {
		t.Errorf("a step after the plain reply: %v", err)
	}
}

// The replies are qwen3_coder as the Qwen3-Coder template writes calls.
func TestActionText(t *testing.T) {
	cases := []struct {
		a    Action
		want string
	}{
		{Action{Tool: "search_emails", Param: "query", Value: "invoice"},
			"<tool_call>\n<function=search_emails>\n<parameter=query>\ninvoice\n</parameter>\n</function>\n</tool_call><|im_end|>"},
		{Action{Tool: "list_folders"}, "<tool_call>\n<function=list_folders>\n</function>\n</tool_call><|im_end|>"},
		{Action{Value: "The answer is 4."}, "The answer is 4.<|im_end|>"},
	}
	for _, c := range cases {
		if got := c.a.Text(); got != c.want {
			t.Errorf("%+v.Text() =\n%s\nwant\n%s", c.a, got, c.want)
		}
	}
}
