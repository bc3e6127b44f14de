package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/agentenv/agentenv/core/episode"
)

// Wire error codes. The episode codes (VALIDATION_ERROR, NOT_FOUND,
// DEPLOY_FAILED, EXECUTION_ERROR, UNSCORED) come from package episode; the
// rest belong to the protocol layer. INVALID_JSON, UNKNOWN_TYPE,
// VALIDATION_ERROR, EXECUTION_ERROR and CAPACITY_REACHED are OpenEnv's own.
const (
	CodeInvalidJSON     = "INVALID_JSON"
	CodeUnknownType     = "UNKNOWN_TYPE"
	CodeValidation      = string(episode.CodeValidation)
	CodeNotFound        = string(episode.CodeNotFound)
	CodeDeploy          = string(episode.CodeDeploy)
	CodeExecution       = string(episode.CodeExecution)
	CodeUnscored        = string(episode.CodeUnscored)
	CodeNoEpisode       = "NO_EPISODE"
	CodeMessageTooLarge = "MESSAGE_TOO_LARGE"
	CodeCapacity        = "CAPACITY_REACHED"
	CodeUnauthorized    = "UNAUTHORIZED"
	CodeShuttingDown    = "SHUTTING_DOWN"
)

// inbound is one client frame: {"type": ..., "data": ...}.
type inbound struct {
	Type    string
	Data    json.RawMessage // nil when absent
	HasData bool
	// Step frames read in one pass (quickStep) come with their reply.
	Reply     string
	ReplyRead bool
}

// FieldError is one entry of a VALIDATION_ERROR's "errors" list, shaped
// like the pydantic errors OpenEnv sends.
type FieldError struct {
	Type string `json:"type"`
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
}

// wireError is an error reply before serialization.
type wireError struct {
	Code    string
	Message string
	Errors  []FieldError
	Extra   map[string]any
}

func (e *wireError) Error() string { return e.Code + ": " + e.Message }

func validationError(msg string, errs ...FieldError) *wireError {
	return &wireError{Code: CodeValidation, Message: msg, Errors: errs}
}

// parseInbound decodes a text frame. Only "type" and "data" are allowed at
// the top level, as in OpenEnv.
func parseInbound(frame []byte) (inbound, *wireError) {
	if reply, ok := quickStep(frame); ok {
		return inbound{Type: "step", Reply: reply, ReplyRead: true}, nil
	}
	return readInbound(frame)
}

// readInbound is parseInbound the long way: the frame decoded as a map of
// raw fields, each field checked and decoded on its own.
func readInbound(frame []byte) (inbound, *wireError) {
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(frame))
	if err := dec.Decode(&top); err != nil {
		return inbound{}, &wireError{Code: CodeInvalidJSON, Message: "Invalid JSON: " + err.Error()}
	}
	if dec.More() {
		return inbound{}, &wireError{Code: CodeInvalidJSON, Message: "Invalid JSON: more than one JSON value in the frame"}
	}
	if top == nil {
		return inbound{}, &wireError{Code: CodeInvalidJSON, Message: "Invalid JSON: the frame must be a JSON object, got null"}
	}
	var errs []FieldError
	var msg inbound
	rawType, ok := top["type"]
	if !ok {
		errs = append(errs, FieldError{Type: "missing", Loc: []any{"type"}, Msg: "Field required"})
	} else if err := json.Unmarshal(rawType, &msg.Type); err != nil {
		errs = append(errs, FieldError{Type: "string_type", Loc: []any{"type"}, Msg: "Input should be a valid string"})
	}
	for k, v := range top {
		switch k {
		case "type":
		case "data":
			if !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
				msg.Data, msg.HasData = v, true
			}
		default:
			errs = append(errs, FieldError{Type: "extra_forbidden", Loc: []any{k}, Msg: "Extra inputs are not permitted"})
		}
	}
	if len(errs) > 0 {
		return inbound{}, validationError("Invalid message: "+describe(errs), errs...)
	}
	return msg, nil
}

// describe turns field errors into one readable line for the message.
func describe(errs []FieldError) string {
	parts := make([]string, len(errs))
	for i, e := range errs {
		loc := make([]string, len(e.Loc))
		for j, l := range e.Loc {
			loc[j] = fmt.Sprint(l)
		}
		parts[i] = strings.Join(loc, ".") + ": " + e.Msg
	}
	return strings.Join(parts, "; ")
}

// resetData is reset's payload after validation.
type resetData struct {
	Req   episode.Request
	WaitS *float64 // nil = the server's default
}

// objectFields decodes data as a JSON object; absent data is an empty one.
func objectFields(data json.RawMessage, has bool) (map[string]json.RawMessage, *wireError) {
	fields := map[string]json.RawMessage{}
	if !has {
		return fields, nil
	}
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return nil, validationError("Invalid message: data must be a JSON object",
			FieldError{Type: "dict_type", Loc: []any{"data"}, Msg: "Input should be a valid dictionary"})
	}
	return fields, nil
}

// parseReset validates reset data: split+index or task_id, and the
// optional tool_format, max_turns, episode_id, wait_s and seed (accepted
// for OpenEnv clients, unused: tasks are deterministic).
func parseReset(data json.RawMessage, has bool) (resetData, *wireError) {
	fields, werr := objectFields(data, has)
	if werr != nil {
		return resetData{}, werr
	}
	var out resetData
	var errs []FieldError
	bad := func(key, typ, msg string) {
		errs = append(errs, FieldError{Type: typ, Loc: []any{"data", key}, Msg: msg})
	}
	str := func(key string, dst *string, maxLen int) {
		raw, ok := fields[key]
		if !ok {
			return
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			bad(key, "string_type", "Input should be a valid string")
			return
		}
		if maxLen > 0 && len(*dst) > maxLen {
			bad(key, "string_too_long", fmt.Sprintf("String should have at most %d characters", maxLen))
		}
	}
	integer := func(key string, min int) *int {
		raw, ok := fields[key]
		if !ok {
			return nil
		}
		f, isNum := number(raw)
		if !isNum || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			bad(key, "int_type", "Input should be a valid integer")
			return nil
		}
		if f < float64(min) {
			bad(key, "greater_than_equal", fmt.Sprintf("Input should be greater than or equal to %d", min))
			return nil
		}
		n := int(f)
		return &n
	}
	for k := range fields {
		switch k {
		case "split", "index", "task_id", "tool_format", "max_turns", "episode_id", "wait_s", "seed":
		default:
			bad(k, "extra_forbidden", "Extra inputs are not permitted")
		}
	}
	str("split", &out.Req.Split, 0)
	str("task_id", &out.Req.TaskID, 0)
	str("tool_format", &out.Req.ToolFormat, 0)
	str("episode_id", &out.Req.EpisodeID, episode.MaxEpisodeIDLen)
	out.Req.Index = integer("index", 0)
	if n := integer("max_turns", 0); n != nil {
		out.Req.MaxTurns = *n
	}
	integer("seed", 0)
	if raw, ok := fields["wait_s"]; ok {
		f, isNum := number(raw)
		switch {
		case !isNum:
			bad("wait_s", "float_type", "Input should be a valid number")
		case f < 0:
			bad("wait_s", "greater_than_equal", "Input should be greater than or equal to 0")
		default:
			out.WaitS = &f
		}
	}
	if len(errs) == 0 {
		_, hasSplit := fields["split"]
		switch {
		case out.Req.TaskID != "" && (hasSplit || out.Req.Index != nil):
			bad("task_id", "value_error", "give either task_id or split+index, not both")
		case out.Req.TaskID == "" && out.Req.Index == nil:
			if hasSplit {
				bad("index", "missing", "Field required: split needs an index")
			} else {
				bad("task_id", "missing", "Field required: reset needs task_id, or split and index")
			}
		case out.Req.TaskID == "" && out.Req.Split == "":
			out.Req.Split = "all"
		}
	}
	if len(errs) > 0 {
		return resetData{}, validationError("Invalid reset: "+describe(errs), errs...)
	}
	return out, nil
}

// number reads a JSON number; ok is false for anything else.
func number(raw json.RawMessage) (float64, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return 0, false
	}
	n, isNum := v.(json.Number) // a quoted "1" decodes as a string, not a Number
	if !isNum {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// stepReply is the reply of a step frame.
func stepReply(msg inbound) (string, *wireError) {
	if msg.ReplyRead {
		return msg.Reply, nil
	}
	return parseStep(msg.Data, msg.HasData)
}

// parseStep validates step data: exactly {"reply": "<text>"}.
func parseStep(data json.RawMessage, has bool) (string, *wireError) {
	if !has {
		return "", validationError(`Invalid step: data is required, e.g. {"type":"step","data":{"reply":"..."}}`,
			FieldError{Type: "missing", Loc: []any{"data"}, Msg: "Field required"})
	}
	fields, werr := objectFields(data, has)
	if werr != nil {
		return "", werr
	}
	var errs []FieldError
	for k := range fields {
		if k != "reply" {
			errs = append(errs, FieldError{Type: "extra_forbidden", Loc: []any{"data", k}, Msg: "Extra inputs are not permitted"})
		}
	}
	var reply string
	raw, ok := fields["reply"]
	if !ok {
		msg := "Field required: the model's reply text"
		if t, isAction := fields["type"]; isAction && (string(t) == `"call_tool"` || string(t) == `"list_tools"`) {
			msg = "Field required: this server takes the model's reply text and runs the tool calls in it; MCP actions are not served"
		}
		errs = append(errs, FieldError{Type: "missing", Loc: []any{"data", "reply"}, Msg: msg})
	} else if err := json.Unmarshal(raw, &reply); err != nil {
		errs = append(errs, FieldError{Type: "string_type", Loc: []any{"data", "reply"}, Msg: "Input should be a valid string"})
	}
	if len(errs) > 0 {
		return "", validationError("Invalid step: "+describe(errs), errs...)
	}
	return reply, nil
}

// wireObservation is episode.Observation as sent: done and reward live
// beside it, as OpenEnv serializes observations, and metrics stay inside
// because OpenEnv clients drop a top-level metadata.
type wireObservation struct {
	EpisodeID string             `json:"episode_id"`
	TaskID    string             `json:"task_id"`
	Messages  []episode.Message  `json:"messages"`
	Tools     []openAITool       `json:"tools,omitempty"`
	Turn      int                `json:"turn"`
	Metrics   map[string]float64 `json:"metrics,omitempty"`
	Times     map[string]float64 `json:"times,omitempty"`
}

// openAITool is a tool as the server sends it: an OpenAI function schema,
// {"type":"function","function":{"name":...,"description":...,"parameters":{...}}}.
// The engine's tool is flat; this is the one place it changes shape.
type openAITool struct {
	Type     string         `json:"type"`
	Function openAIFunction `json:"function"`
}

type openAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

func openAITools(tools []episode.Tool) []openAITool {
	if tools == nil {
		return nil
	}
	out := make([]openAITool, len(tools))
	for i, t := range tools {
		out[i] = openAITool{Type: "function", Function: openAIFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters}}
	}
	return out
}

type observationData struct {
	Observation wireObservation `json:"observation"`
	Reward      *float64        `json:"reward"`
	Done        bool            `json:"done"`
}

type envelope struct {
	Type string `json:"type"`
	Data any    `json:"data"`
}

// encodeObservation serializes an observation reply.
func encodeObservation(o episode.Observation) ([]byte, error) {
	msgs := o.Messages
	if msgs == nil {
		msgs = []episode.Message{}
	}
	d := observationData{
		Observation: wireObservation{
			EpisodeID: o.EpisodeID, TaskID: o.TaskID, Messages: msgs,
			Tools: openAITools(o.Tools), Turn: o.Turn, Metrics: o.Metrics, Times: o.Times,
		},
		Done: o.Done,
	}
	if o.Done {
		d.Reward = o.Reward
	}
	for k, v := range o.Metrics {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("metric %q is %v, which JSON cannot carry", k, v)
		}
	}
	if d.Reward != nil && (math.IsNaN(*d.Reward) || math.IsInf(*d.Reward, 0)) {
		return nil, fmt.Errorf("reward is %v, which JSON cannot carry", *d.Reward)
	}
	return json.Marshal(envelope{Type: "observation", Data: d})
}

// stateData answers a state message; episode_id and step_count are
// OpenEnv's State, the rest are extras (OpenEnv's State allows them).
type stateData struct {
	EpisodeID *string `json:"episode_id"`
	StepCount int     `json:"step_count"`
	TaskID    *string `json:"task_id"`
	Turn      int     `json:"turn"`
	Done      bool    `json:"done"`
	Live      bool    `json:"live"`
}

func encodeState(s stateData) []byte {
	b, _ := json.Marshal(envelope{Type: "state", Data: s}) // plain fields: cannot fail
	return b
}

// encodeError serializes an error reply.
func encodeError(e *wireError) []byte {
	d := map[string]any{"message": e.Message, "code": e.Code}
	if len(e.Errors) > 0 {
		d["errors"] = e.Errors
	}
	for k, v := range e.Extra {
		d[k] = v
	}
	b, err := json.Marshal(envelope{Type: "error", Data: d})
	if err != nil {
		b, _ = json.Marshal(envelope{Type: "error", Data: map[string]any{"message": e.Message, "code": e.Code}})
	}
	return b
}
