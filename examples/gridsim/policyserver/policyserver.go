// Package policyserver serves GridSim's scripted policies as an
// OpenAI-compatible chat endpoint (POST /v1/chat/completions, GET
// /v1/models): a model to evaluate with `agentenv eval` that needs no GPU,
// and the test double of eval's tests.
//
// Each request's model field names a policy (optimal, greedy, idle,
// random, malformed). The server plays as a model does, from the
// conversation alone: it checks its system prompt offers get_prices and
// submit_schedule, calls get_prices, reads the day from the tool's answer,
// submits the policy's schedule, and ends its turn with a reply without a
// call once the schedule is accepted. Calls are written in the tool-call
// format it was started with (hermes or qwen3_coder), as the model's chat
// template lays them out. The malformed policy writes calls no parser
// reads, then gives up.
package policyserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/examples/gridsim/baseline"
	"github.com/agentenv/agentenv/examples/gridsim/gridenv"
)

// Malformed is the policy whose calls cannot be read.
const Malformed = "malformed"

// Policies are the models served: the baselines, then malformed.
var Policies = append(append([]string(nil), baseline.Names...), Malformed)

// Formats are the tool-call formats the server writes.
var Formats = []string{"hermes", "qwen3_coder"}

// Server answers chat completions with the scripted policies.
type Server struct {
	// Format is the tool-call format of the replies: hermes or qwen3_coder.
	Format string
	// Delay is waited before each answer, to stand in for a model's time.
	Delay time.Duration
	Log   hclog.Logger

	n atomic.Int64 // completions answered, for their ids
}

// New checks format and returns a Server.
func New(format string, delay time.Duration, log hclog.Logger) (*Server, error) {
	if format != "hermes" && format != "qwen3_coder" {
		return nil, fmt.Errorf("tool format %q: want hermes or qwen3_coder", format)
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Server{Format: format, Delay: delay, Log: log}, nil
}

// Handler serves /v1/chat/completions and /v1/models.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.complete)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return mux
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		OwnedBy string `json:"owned_by"`
	}
	var data []model
	for _, p := range Policies {
		data = append(data, model{ID: p, Object: "model", OwnedBy: "gridsim"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// request is the part of a chat completion request read here.
type request struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// message is a request message with its content as text.
type message struct{ role, content string }

func (s *Server) complete(w http.ResponseWriter, r *http.Request) {
	var req request
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<20)).Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, "the body is not a chat completion request: "+err.Error())
		return
	}
	if req.Stream {
		apiError(w, http.StatusBadRequest, "stream: the GridSim policy server does not stream; send stream=false")
		return
	}
	known := false
	for _, p := range Policies {
		known = known || p == req.Model
	}
	if !known {
		apiError(w, http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist: the models are the policies %s.", req.Model, strings.Join(Policies, ", ")))
		return
	}
	msgs := make([]message, len(req.Messages))
	for i, m := range req.Messages {
		if err := json.Unmarshal(m.Content, &msgs[i].content); err != nil {
			apiError(w, http.StatusBadRequest, fmt.Sprintf("messages[%d].content: want a string", i))
			return
		}
		msgs[i].role = m.Role
	}
	if s.Delay > 0 {
		t := time.NewTimer(s.Delay)
		select {
		case <-r.Context().Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	text := s.reply(req.Model, msgs)
	s.Log.Debug("answered", "policy", req.Model, "messages", len(msgs), "reply", text)
	n := s.n.Add(1)
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "chatcmpl-gridsim-" + strconv.FormatInt(n, 10), "object": "chat.completion",
		"created": time.Now().Unix(), "model": req.Model,
		"choices": []map[string]any{{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": text}}},
	})
}

// Final replies: no tool call, so the turn ends.
const (
	Submitted = "The schedule is submitted."
	NoTools   = "I see no get_prices and submit_schedule tools in my instructions, so I cannot trade."
	GiveUp    = "I could not make a valid call, so I stop here."
)

// reply is policy's next reply to the conversation msgs.
func (s *Server) reply(policy string, msgs []message) string {
	if len(msgs) == 0 || msgs[0].role != "system" || !offersTools(msgs[0].content) {
		return NoTools
	}
	replies, last := 0, -1
	for i, m := range msgs {
		if m.role == "assistant" {
			replies, last = replies+1, i
		}
	}
	if policy == Malformed {
		if replies < len(malformed[s.Format]) {
			return malformed[s.Format][replies]
		}
		return GiveUp
	}
	if last < 0 {
		return s.call(gridenv.ToolPrices, nil)
	}
	var answer string
	for _, m := range msgs[last+1:] {
		if m.role == "tool" {
			answer = m.content
		}
	}
	switch {
	case strings.HasPrefix(answer, "Error: "):
		return "The call failed (" + strings.TrimPrefix(answer, "Error: ") + "), so I stop here."
	case strings.HasPrefix(answer, "Schedule accepted"):
		return Submitted
	}
	var day gridenv.Day
	if err := json.Unmarshal([]byte(answer), &day); err != nil || day.Hours == 0 {
		return "I expected the day's prices from get_prices, and got none, so I stop here."
	}
	m, err := day.Market()
	if err != nil {
		return "The day from get_prices does not add up (" + err.Error() + "), so I stop here."
	}
	p, err := baseline.ByName(policy)
	if err != nil {
		return err.Error()
	}
	// The random policy is seeded by the task id in the baselines; a model
	// sees no task id, so it is seeded by the day's date here.
	return s.call(gridenv.ToolSubmit, p.Schedule(m, day.Date))
}

// offersTools reports whether the system prompt shows GridSim's tools, as
// a chat template renders tools= into it.
func offersTools(system string) bool {
	return strings.Contains(system, "<tools>") && strings.Contains(system, gridenv.ToolPrices) && strings.Contains(system, gridenv.ToolSubmit)
}

// call writes one tool call as the format's chat template lays it out: a
// schedule, when given, is the call's one argument.
func (s *Server) call(tool string, schedule []int) string {
	list := ""
	if schedule != nil {
		parts := make([]string, len(schedule))
		for i, a := range schedule {
			parts[i] = strconv.Itoa(a)
		}
		// Python's json.dumps spacing, as the templates print arguments.
		list = "[" + strings.Join(parts, ", ") + "]"
	}
	if s.Format == "qwen3_coder" {
		params := ""
		if schedule != nil {
			params = "<parameter=schedule>\n" + list + "\n</parameter>\n"
		}
		return "<tool_call>\n<function=" + tool + ">\n" + params + "</function>\n</tool_call>"
	}
	args := "{}"
	if schedule != nil {
		args = `{"schedule": ` + list + `}`
	}
	return "<tool_call>\n" + `{"name": "` + tool + `", "arguments": ` + args + "}\n</tool_call>"
}

// malformed are the malformed policy's replies, one a turn, by format:
// each a call its format's parser cannot read, for a different reason.
var malformed = map[string][]string{
	"hermes": {
		// The JSON object is not closed.
		"<tool_call>\n" + `{"name": "get_prices", "arguments": {}` + "\n</tool_call>",
		// The arguments are a string holding JSON, not an object.
		"<tool_call>\n" + `{"name": "submit_schedule", "arguments": "{\"schedule\": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]}"}` + "\n</tool_call>",
	},
	"qwen3_coder": {
		// A hermes JSON call, which this format does not take.
		"<tool_call>\n" + `{"name": "get_prices", "arguments": {}}` + "\n</tool_call>",
		// The function's name is not closed with ">".
		"<tool_call>\n<function=submit_schedule\n<parameter=schedule>\n[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]\n</parameter>\n</function>\n</tool_call>",
	},
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client went away
}

// apiError answers as OpenAI's API (and vLLM) answer an error.
func apiError(w http.ResponseWriter, status int, msg string) {
	typ := map[int]string{http.StatusBadRequest: "BadRequestError", http.StatusNotFound: "NotFoundError"}[status]
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": status}})
}
