package policyserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	hermes "github.com/agentenv/agentenv/plugins/toolformat-hermes"

	"github.com/agentenv/agentenv/examples/gridsim/baseline"
	"github.com/agentenv/agentenv/examples/gridsim/days"
	"github.com/agentenv/agentenv/examples/gridsim/gridenv"
)

// system is a system prompt offering GridSim's tools, as a template
// renders tools= into it.
const system = "You trade.\n\n# Tools\n\n<tools>\n{\"name\": \"get_prices\"}\n{\"name\": \"submit_schedule\"}\n</tools>"

type msg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func ask(t *testing.T, url, model string, msgs []msg) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "messages": msgs})
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, string(b)
	}
	var c struct {
		Object  string
		Choices []struct {
			Message      msg
			FinishReason string `json:"finish_reason"`
		}
	}
	if err := json.Unmarshal(b, &c); err != nil || c.Object != "chat.completion" || len(c.Choices) != 1 ||
		c.Choices[0].Message.Role != "assistant" || c.Choices[0].FinishReason != "stop" {
		t.Fatalf("not a chat completion: %s", b)
	}
	return resp.StatusCode, c.Choices[0].Message.Content
}

// env is GridSim's env in process, loaded with eval day 1.
func env(t *testing.T) (*mcp.ClientSession, days.Line) {
	t.Helper()
	lines, err := days.Generate(days.DefaultSeed, days.DefaultTrain, days.DefaultEval)
	if err != nil {
		t.Fatal(err)
	}
	line := lines[days.DefaultTrain]
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := gridenv.New(nil).Server().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	d := line.Day()
	prices := make([]float64, len(d.PricesCents))
	for h, c := range d.PricesCents {
		prices[h] = float64(c) / 100
	}
	callEnv(t, cs, gridenv.ToolLoadDay, map[string]any{"date": line.Date, "power_mw": d.PowerMW, "capacity_mwh": d.CapacityMWh(),
		"efficiency_pct": d.EfficiencyPct, "start_mwh": d.StartMWh(), "prices": prices})
	return cs, line
}

func callEnv(t *testing.T, cs *mcp.ClientSession, tool string, args any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("%s: %v %+v", tool, err, res)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// Each policy plays a day as a model: get_prices, then its schedule,
// read by the real hermes parser and graded by the real env, then a reply
// without a call.
func TestPoliciesPlayADay(t *testing.T) {
	s, _ := New("hermes", 0, nil)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	for _, policy := range baseline.Names {
		t.Run(policy, func(t *testing.T) {
			cs, line := env(t)
			conv := []msg{{"system", system}, {"user", "Day: " + line.Weekday + " " + line.Date}}
			_, reply := ask(t, srv.URL, policy, conv)
			if reply != "<tool_call>\n{\"name\": \"get_prices\", \"arguments\": {}}\n</tool_call>" {
				t.Fatalf("first reply %q", reply)
			}
			conv = append(conv, msg{"assistant", reply}, msg{"tool", callEnv(t, cs, gridenv.ToolPrices, map[string]any{})})
			_, reply = ask(t, srv.URL, policy, conv)
			parsed, _ := hermes.New().Parse(context.Background(), reply, nil)
			if len(parsed.Calls) != 1 || parsed.Calls[0].Name != gridenv.ToolSubmit || len(parsed.Unparsed) != 0 {
				t.Fatalf("second reply %q: %+v", reply, parsed)
			}
			var args struct{ Schedule []int }
			json.Unmarshal(parsed.Calls[0].Arguments, &args)
			p, _ := baseline.ByName(policy)
			if want := p.Schedule(line.Day(), line.Date); !slices.Equal(args.Schedule, want) {
				t.Fatalf("schedule %v, want %s's %v", args.Schedule, policy, want)
			}
			conv = append(conv, msg{"assistant", reply}, msg{"tool", callEnv(t, cs, gridenv.ToolSubmit, json.RawMessage(parsed.Calls[0].Arguments))})
			if _, reply = ask(t, srv.URL, policy, conv); reply != Submitted {
				t.Fatalf("last reply %q", reply)
			}
			grade, _ := strconv.ParseFloat(callEnv(t, cs, gridenv.ToolGrade, map[string]any{}), 64)
			switch {
			case policy == "optimal" && grade != 1, policy == "idle" && grade != 0.2, grade < 0 || grade > 1:
				t.Fatalf("graded %v", grade)
			}
		})
	}
}

func TestReplies(t *testing.T) {
	day := `{"date": "2020-01-02", "hours": 24, "power_mw": 10, "capacity_mwh": 20, "efficiency_pct": 90, "sell_mwh": 9, "start_mwh": 0, "prices": [` +
		strings.TrimSuffix(strings.Repeat("10, ", 12)+strings.Repeat("50, ", 12), ", ") + `]}`
	for _, c := range []struct {
		name, format, policy string
		conv                 []msg
		want                 string
	}{
		{"qwen3_coder get_prices", "qwen3_coder", "idle", []msg{{"system", system}, {"user", "u"}},
			"<tool_call>\n<function=get_prices>\n</function>\n</tool_call>"},
		{"qwen3_coder submit", "qwen3_coder", "idle", []msg{{"system", system}, {"user", "u"}, {"assistant", "…"}, {"tool", day}},
			"<tool_call>\n<function=submit_schedule>\n<parameter=schedule>\n[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]\n</parameter>\n</function>\n</tool_call>"},
		{"no tools in the system prompt", "hermes", "optimal", []msg{{"system", "You trade."}, {"user", "u"}}, NoTools},
		{"no system prompt", "hermes", "optimal", []msg{{"user", "u"}}, NoTools},
		{"a refused call", "hermes", "optimal", []msg{{"system", system}, {"user", "u"}, {"assistant", "…"}, {"tool", "Error: schedule rejected"}},
			"The call failed (schedule rejected), so I stop here."},
		{"no day", "hermes", "greedy", []msg{{"system", system}, {"user", "u"}, {"assistant", "…"}, {"tool", "hello"}},
			"I expected the day's prices from get_prices, and got none, so I stop here."},
		{"malformed 1", "hermes", Malformed, []msg{{"system", system}, {"user", "u"}}, malformed["hermes"][0]},
		{"malformed 2", "qwen3_coder", Malformed, []msg{{"system", system}, {"user", "u"}, {"assistant", "…"}, {"tool", "Error: …"}}, malformed["qwen3_coder"][1]},
		{"malformed gives up", "hermes", Malformed, []msg{{"system", system}, {"user", "u"}, {"assistant", "…"}, {"tool", "…"}, {"assistant", "…"}, {"tool", "…"}}, GiveUp},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := New(c.format, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(s.Handler())
			defer srv.Close()
			if _, got := ask(t, srv.URL, c.policy, c.conv); got != c.want {
				t.Fatalf("got %q\nwant %q", got, c.want)
			}
		})
	}
}

// The malformed policy's calls are each unreadable by the hermes parser.
func TestMalformedIsUnparsed(t *testing.T) {
	for _, reply := range malformed["hermes"] {
		p, _ := hermes.New().Parse(context.Background(), reply, nil)
		if len(p.Calls) != 0 || len(p.Unparsed) != 1 || p.Unparsed[0].Reason == "" {
			t.Errorf("%q: %+v", reply, p)
		}
	}
}

func TestRefusals(t *testing.T) {
	if _, err := New("xml", 0, nil); err == nil {
		t.Fatal("an unknown format was taken")
	}
	s, _ := New("hermes", 50*time.Millisecond, nil)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	post := func(body string) (int, string) {
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"model": "gpt-5", "messages": []}`, 404, "The model `gpt-5` does not exist: the models are the policies optimal, greedy, random, idle, malformed."},
		{`{"model": "idle", "stream": true, "messages": []}`, 400, "does not stream"},
		{`{"model": "idle", "messages": [{"role": "user", "content": [{"type": "text"}]}]}`, 400, "messages[0].content: want a string"},
		{`not json`, 400, "the body is not a chat completion request"},
	} {
		status, body := post(c.body)
		var e struct{ Error struct{ Message string } }
		if status != c.status || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error.Message, c.want) {
			t.Errorf("%s: %d %s", c.body, status, body)
		}
	}
	resp, err := http.Get(srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var models struct{ Data []struct{ ID string } }
	json.NewDecoder(resp.Body).Decode(&models)
	if len(models.Data) != 5 || models.Data[4].ID != Malformed {
		t.Fatalf("%+v", models)
	}
	// The delay holds each answer back.
	start := time.Now()
	ask(t, srv.URL, "idle", []msg{{"system", system}})
	if time.Since(start) < 50*time.Millisecond {
		t.Error("answered before the delay")
	}
}
