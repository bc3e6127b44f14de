package client

import (
	"encoding/json"
	"time"
)

// ResetRequest says which task a Reset plays and how. Give TaskID, or
// Split and Index.
type ResetRequest struct {
	// TaskID names the task (wire: task_id).
	TaskID string
	// Split and Index name the task at Index of Split; Split "" means
	// "all". Used when TaskID is "".
	Split string
	Index int
	// ToolFormat is how tool calls are read from the replies (hermes,
	// qwen3_coder or a tool-format plugin); "" is the server's default.
	ToolFormat string
	// MaxTurns ends and scores the episode after this many replies; 0 is
	// the task's own limit.
	MaxTurns int
	// EpisodeID names the episode (at most 255 bytes); "" lets the server
	// generate one.
	EpisodeID string
	// Wait is how long the server may queue the reset for a free slot
	// (wire: wait_s). 0: until shortly before ctx's deadline, or the
	// server's default (600 s) when ctx has none; negative: not at all.
	Wait time.Duration
}

// resetData is ResetRequest on the wire.
type resetData struct {
	TaskID     string   `json:"task_id,omitempty"`
	Split      *string  `json:"split,omitempty"`
	Index      *int     `json:"index,omitempty"`
	ToolFormat string   `json:"tool_format,omitempty"`
	MaxTurns   int      `json:"max_turns,omitempty"`
	EpisodeID  string   `json:"episode_id,omitempty"`
	WaitS      *float64 `json:"wait_s,omitempty"`
}

// Result is the server's answer to a reset or a step: an observation, and
// beside it, as in OpenEnv, the reward and whether the episode is done.
type Result struct {
	Observation Observation `json:"observation"`
	// Reward is the episode's reward once Done; nil before, and nil when
	// done without one.
	Reward *float64 `json:"reward"`
	// Done: the episode is over (scored); the server has torn it down.
	Done bool `json:"done"`
}

// Observation is what the model's side sees.
type Observation struct {
	EpisodeID string `json:"episode_id"`
	TaskID    string `json:"task_id"`
	// Messages: after a reset, the opening prompt (a system message if the
	// task has one, then a user message); after a step, one tool message
	// per tool call, then the next turn's prompt as a user message when a
	// turn ended and another opened.
	Messages []Message `json:"messages"`
	// Tools of the open turn as OpenAI function schemas; sent on reset and
	// each time a new turn opens, else empty.
	Tools []Tool `json:"tools,omitempty"`
	// Turn is the number of model replies taken so far.
	Turn int `json:"turn"`
	// Metrics, when done: score/<step id> per verifier, tool_calls,
	// unparsed_calls, invalid_calls, tool_errors, turns and failed (0/1).
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Times, when done: seconds the episode spent on the server in each
	// phase (queue, deploy, ready, setup, step, tool (part of step),
	// verify, teardown (0: it runs after)); see docs/serving.md#phases.
	Times map[string]float64 `json:"times,omitempty"`
}

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Tool is a tool offered to the model, as an OpenAI function schema:
// {"type": "function", "function": {"name", "description", "parameters"}}.
type Tool struct {
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function is the function part of a Tool; Parameters is its JSON Schema.
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// State is the session's state: OpenEnv's episode_id and step_count, and
// agentenv's task_id, turn, done and live.
type State struct {
	// EpisodeID and TaskID name the current (or just finished) episode;
	// "" before any reset.
	EpisodeID string `json:"episode_id"`
	TaskID    string `json:"task_id"`
	// StepCount is the steps taken in this episode.
	StepCount int  `json:"step_count"`
	Turn      int  `json:"turn"`
	Done      bool `json:"done"`
	// Live: the episode holds a sandbox now.
	Live bool `json:"live"`
}

// Split is one split of the served bundle and its number of tasks.
type Split struct {
	Name string `json:"name"`
	Size int    `json:"size"`
}

// TaskPage is a range of a split's tasks: those with index in
// [Start, Stop), out of Size.
type TaskPage struct {
	Split string      `json:"split"`
	Size  int         `json:"size"`
	Start int         `json:"start"`
	Stop  int         `json:"stop"`
	Tasks []TaskEntry `json:"tasks"`
}

// TaskEntry is a task's place in a split. Tasks with the same Toolset
// offer the same tools.
type TaskEntry struct {
	Index   int    `json:"index"`
	TaskID  string `json:"task_id"`
	Toolset string `json:"toolset"`
}

// TaskInfo describes one task.
type TaskInfo struct {
	TaskID  string `json:"task_id"`
	Toolset string `json:"toolset"`
	// Prompt is the opening messages of the first model turn.
	Prompt []Message `json:"prompt"`
	// Turns is the number of model turns.
	Turns int        `json:"turns"`
	Steps []StepInfo `json:"steps"`
}

// StepInfo names one step of a task and its type (deploy_env, call_tool,
// prompt_agent, verify_tool, ...).
type StepInfo struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}
