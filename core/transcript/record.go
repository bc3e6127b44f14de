// Package transcript holds the record of one ended episode as a user
// reads it back: the task, every model reply with the calls read from it,
// the calls that could not be read and why, what the env answered, the
// scores, the reward, how the episode ended and where its time went.
//
// The episode engine captures the turns (episode.Config.Transcripts); an
// Observer turns each ended episode's Result into a Record and hands it to
// Sinks: a Recent ring in memory (what the /ui page reads) and a Writer
// appending JSON lines to daily files (serve --record DIR). `agentenv
// transcripts` reads the files back.
//
// Record is a contract: the JSON it encodes to is the file format, and
// fields are only ever added.
package transcript

import (
	"encoding/json"
	"time"

	"github.com/agentenv/agentenv/core/episode"
)

// Format is the version of the record layout, written in each line's
// "format" field. It changes only if a field changes meaning.
const Format = 1

// Record is one ended episode. A Record handed to a Sink is shared: Sinks
// read it and never change it.
type Record struct {
	Format    int    `json:"format"`
	EpisodeID string `json:"episode_id"`
	// Bundle and Server say where it was played: the bundle's name and
	// the id of the agentenv serve (its bundle path and address), so the
	// records of several servers read together stay apart.
	Bundle string `json:"bundle,omitempty"`
	Server string `json:"server,omitempty"`
	TaskID string `json:"task_id"`
	// Split and Index are as the reset gave them: empty and nil when the
	// reset named the task by its id.
	Split      string `json:"split,omitempty"`
	Index      *int   `json:"index,omitempty"`
	ToolFormat string `json:"tool_format,omitempty"`
	Sandbox    string `json:"sandbox,omitempty"`
	// Prompt is the opening messages the model got (system, user), before
	// any tool list a trainer's chat template adds.
	Prompt []Message `json:"prompt"`
	// Tools are the tools offered in the first turn.
	Tools []Tool `json:"tools,omitempty"`
	// Turns are the model's replies, in order, each with its answer. A
	// live episode keeps a bounded transcript (serve --transcript-bytes,
	// --transcript-turn-bytes): text past it is cut with a note, and
	// TurnsOmitted counts the replies after Turns that were not kept.
	Turns        []Turn `json:"turns"`
	TurnsOmitted int    `json:"turns_omitted,omitempty"`
	// Reward is null unless the episode was scored (outcome done).
	Reward *float64 `json:"reward"`
	// Scores are the verifiers' scores by step id (score/<id> metrics).
	Scores map[string]float64 `json:"scores,omitempty"`
	// Metrics are the final observation's other metrics: tool_calls,
	// unparsed_calls, invalid_calls, tool_errors, turns, failed.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	Outcome episode.Outcome    `json:"outcome"`
	Cause   episode.Cause      `json:"cause"`
	Source  episode.Source     `json:"source"`
	// Error is the failure of a failed episode, as the server logs it.
	Error string `json:"error,omitempty"`
	// Times are the seconds spent in each phase (episode.Phases), every
	// phase present; tool is part of step.
	Times map[string]float64 `json:"times"`
	// Started is when the episode was made (its queue wait is before);
	// Ended when its teardown finished.
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`
}

// Message is one chat message.
type Message = episode.Message

// Tool is a tool offered to the model.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Turn is one model reply and what answered it.
type Turn struct {
	// Reply is the reply as the model wrote it (tool calls in its format).
	Reply string `json:"reply"`
	// Calls are the tool calls read from the reply, end_turn included,
	// whether they ran or not (Messages says).
	Calls []Call `json:"calls,omitempty"`
	// Unparsed are the calls the tool format could not read, with why;
	// UnparsedOmitted and CallsOmitted count what the tool-format plugin
	// read but did not send (a flood of bad blocks).
	Unparsed        []Unparsed `json:"unparsed,omitempty"`
	UnparsedOmitted int        `json:"unparsed_omitted,omitempty"`
	CallsOmitted    int        `json:"calls_omitted,omitempty"`
	// Messages are the tool messages answering the reply exactly as the
	// server sent them: results cut as the step path cuts them (the reply
	// limits), errors, and end_turn's next prompt. A user message carries
	// the next turn's prompt when a turn ended at its own max_turns.
	Messages []Message `json:"messages"`
	// StepS is the seconds the server took over the reply (its tool calls
	// included, verifiers not).
	StepS float64 `json:"step_s"`
}

// Call is one tool call read from a reply.
type Call struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Unparsed is a tool call that could not be read.
type Unparsed struct {
	// Text is the call's raw text, cut to MaxUnparsedText bytes (the
	// reply holds it whole).
	Text   string `json:"text"`
	Reason string `json:"reason"`
}

// MaxUnparsedText bounds Unparsed.Text.
const MaxUnparsedText = 2000

// Conversation is the episode as a chat: the prompt, then each reply as
// an assistant message followed by the messages answering it.
func (r *Record) Conversation() []Message {
	n := len(r.Prompt)
	for _, t := range r.Turns {
		n += 1 + len(t.Messages)
	}
	out := make([]Message, 0, n)
	out = append(out, r.Prompt...)
	for _, t := range r.Turns {
		out = append(out, Message{Role: "assistant", Content: t.Reply})
		out = append(out, t.Messages...)
	}
	return out
}

// Score is the reward, or ok false when there is none.
func (r *Record) Score() (float64, bool) {
	if r.Reward == nil {
		return 0, false
	}
	return *r.Reward, true
}

// OpenAITool is a tool as the server sends it to trainers: an OpenAI
// function schema.
type OpenAITool struct {
	Type     string         `json:"type"`
	Function OpenAIFunction `json:"function"`
}

// OpenAIFunction is an OpenAITool's function.
type OpenAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// OpenAITools are r's tools as the server sent them (the observation's
// tools, /toolsets/{id}/tools): what a chat template renders.
func (r *Record) OpenAITools() []OpenAITool {
	out := make([]OpenAITool, len(r.Tools))
	for i, t := range r.Tools {
		out[i] = OpenAITool{Type: "function", Function: OpenAIFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters}}
	}
	return out
}
