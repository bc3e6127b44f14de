// Package episode plays one task of a bundle as one episode: deploy the
// env, run setup, open the model's turns, run its tool calls, score, tear
// down. This file is the contract the server plays episodes through.
package episode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentenv/agentenv/sdk/toolformat"
)

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Tool is a tool offered to the model: the one tool type from the env's
// tools/list to the tool format. The server renders it as an OpenAI
// function schema where it sends it.
type Tool = toolformat.Tool

// Request says which task to play and how.
type Request struct {
	Split      string `json:"split,omitempty"`
	Index      *int   `json:"index,omitempty"`
	TaskID     string `json:"task_id,omitempty"`
	ToolFormat string `json:"tool_format,omitempty"` // "" = the server's default
	MaxTurns   int    `json:"max_turns,omitempty"`   // 0 = no cap beyond the task's own
	EpisodeID  string `json:"episode_id,omitempty"`  // "" = generated
	// Queued is how long the reset waited for a capacity slot before Play
	// (the server's admission): the episode's queue phase.
	Queued time.Duration `json:"-"`
}

// Observation is what the model's side sees after a reset or a step.
type Observation struct {
	EpisodeID string `json:"episode_id"`
	TaskID    string `json:"task_id"`
	// Messages: after Start, the opening prompt (system, user); after a
	// step, the tool messages answering the reply's calls, end_turn's
	// carrying the next prompt. A user message carries it only when a
	// turn ended at its own max_turns and another opened; a reply without
	// a tool call ends every turn left, and gets no message.
	Messages []Message `json:"messages"`
	// Tools offered in the open turn; set by Start and when a new turn opens.
	Tools []Tool `json:"-"`
	Turn  int    `json:"turn"` // model replies taken so far
	Done  bool   `json:"done"`
	// Reward is set when Done.
	Reward *float64 `json:"reward,omitempty"`
	// Metrics is set when Done: score/<step id>, tool_calls, unparsed_calls,
	// turns, failed (0/1).
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Times is set when Done: seconds spent in each phase (Phases) so far,
	// the teardown (which runs after) aside.
	Times map[string]float64 `json:"times,omitempty"`
}

// Code classifies an episode failure; the server sends it as the wire
// error code.
type Code string

const (
	CodeValidation Code = "VALIDATION_ERROR" // bad request (unknown split, bad index, ...)
	CodeNotFound   Code = "NOT_FOUND"        // no such task
	CodeDeploy     Code = "DEPLOY_FAILED"    // the env could not be deployed or set up
	CodeExecution  Code = "EXECUTION_ERROR"  // the env or a plugin failed mid-episode
	CodeUnscored   Code = "UNSCORED"         // the episode ended with no score
)

// Error is an episode failure with its code.
type Error struct {
	Code Code
	Err  error
	// Cause is why the episode ended, for its Result ("" = classified
	// from Code and Err).
	Cause Cause
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %v", e.Code, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// CodeOf returns the code of err, or CodeExecution when it carries none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeExecution
}

// Episode is one episode in play. Its methods are called from one
// goroutine at a time (one WebSocket session), except Close, which may be
// called concurrently with Start or Step (shutdown) and makes them return.
type Episode interface {
	ID() string
	// Start deploys the env, runs setup and opens the first turn.
	Start(ctx context.Context) (Observation, error)
	// Step takes one model reply and answers it. A reply that ends the
	// last turn (or the max_turns-th reply) scores the episode: Done.
	Step(ctx context.Context, reply string) (Observation, error)
	// Close tears the episode down. It is idempotent and always runs the
	// teardown, whatever state the episode is in.
	Close(ctx context.Context) error
	// State is where the episode stands. Call it from the goroutine that
	// calls Start and Step; it stays valid after Close.
	State() State
	// Abandon records why the episode is being closed before it ended
	// (the client left, the server shuts down), for its Result; call it
	// before Close. It changes nothing of an episode that already ended.
	Abandon(cause Cause)
	// Result is the episode's record so far: safe to call at any time,
	// from any goroutine.
	Result() Result
}

// State is where an episode stands, as the OpenEnv state message reports it.
type State struct {
	EpisodeID string
	TaskID    string
	Turn      int  // model replies taken
	Done      bool // scored
	Started   bool // Start succeeded
}

// Player makes episodes. The engine implements it; the server plays
// through it.
type Player interface {
	// Play resolves the request to a task and returns an episode ready to
	// Start. Errors carry CodeValidation or CodeNotFound.
	Play(req Request) (Episode, error)
	// Tools returns the tools of a toolset as offered to the model,
	// deploying one env for the toolset the first time and caching it.
	Tools(ctx context.Context, toolset string) ([]Tool, error)
}
