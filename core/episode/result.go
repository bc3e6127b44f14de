package episode

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/agentenv/agentenv/core/envclient"
	"github.com/agentenv/agentenv/sdk"
)

// Phase names a part of an episode's time. The phases of one episode add
// up to its env time, except PhaseTool, which is part of PhaseStep.
type Phase string

const (
	PhaseQueue    Phase = "queue"    // the reset waited for a capacity slot (the server's admission)
	PhaseDeploy   Phase = "deploy"   // the sandbox's Deploy call (taking a warm sandbox: the check it still answers)
	PhaseReady    Phase = "ready"    // after Deploy: the env's MCP server answering and its tools listed
	PhaseSetup    Phase = "setup"    // call_tool steps
	PhaseStep     Phase = "step"     // a model reply, read and answered (its tool calls included), verifiers not
	PhaseTool     Phase = "tool"     // one model tool call on the env, inside a step
	PhaseVerify   Phase = "verify"   // verifier steps and the reward
	PhaseTeardown Phase = "teardown" // terminating the sandbox, after the episode ended
)

// Phases lists every phase, in the order an episode meets them.
var Phases = []Phase{PhaseQueue, PhaseDeploy, PhaseReady, PhaseSetup, PhaseStep, PhaseTool, PhaseVerify, PhaseTeardown}

// Span is one timed part of an episode.
type Span struct {
	Phase   Phase
	Env     string // the env it concerns ("" for none: a step of a task without envs)
	Sandbox string // the sandbox plugin (Config.SandboxName)
	Start   time.Time
	Took    time.Duration
}

// Outcome is how an episode ended.
type Outcome string

const (
	OutcomeDone      Outcome = "done"      // scored
	OutcomeFailed    Outcome = "failed"    // ended with an error
	OutcomeAbandoned Outcome = "abandoned" // closed before it was scored
)

// Cause says why an episode ended as it did; Source says whose doing that
// was, which is what tells a trainer whether playing it again can help.
type Cause string

const (
	// The task's own end: every turn ended as the task means them to.
	CauseCompleted Cause = "completed"
	// The model's: scored, but cut short.
	CauseMaxTurns      Cause = "max_turns"      // max_turns (the reset's or a turn's) ended it
	CauseUnparsedCalls Cause = "unparsed_calls" // as max_turns, the last reply's calls unreadable
	CauseNoToolCall    Cause = "no_tool_call"   // a reply without a tool call ended turns it should have ended with end_turn
	CauseAgentTimeout  Cause = "agent_timeout"  // the task's time for the agent (Harbor's [agent] timeout_sec) ran out
	// The infrastructure's: playing it again may well succeed.
	CauseDeployFailed   Cause = "deploy_failed"   // the env could not be deployed or set up
	CauseEnvCrashed     Cause = "env_crashed"     // the env stopped answering mid-episode
	CauseTimeout        Cause = "timeout"         // a deploy, tool call or verifier ran out of its time
	CausePluginDied     Cause = "plugin_died"     // a plugin process (sandbox, tool format, reward) crashed under a call
	CauseServerShutdown Cause = "server_shutdown" // the server shut down under it
	// The task's: a verifier failed or gave no score; replaying will not help.
	CauseUnscored Cause = "unscored"
	// The client's.
	CauseClientClosed Cause = "client_closed" // closed, replaced by a reset, or disconnected
	CauseIdleTimeout  Cause = "idle_timeout"  // the session went idle past the server's idle timeout
)

// Source is whose doing an episode's end was.
type Source string

const (
	SourceNone           Source = "none" // completed
	SourceModel          Source = "model"
	SourceInfrastructure Source = "infrastructure"
	SourceTask           Source = "task"
	SourceClient         Source = "client"
)

// SourceOf is whose doing cause is.
func SourceOf(c Cause) Source {
	switch c {
	case CauseCompleted:
		return SourceNone
	case CauseMaxTurns, CauseUnparsedCalls, CauseNoToolCall, CauseAgentTimeout:
		return SourceModel
	case CauseUnscored:
		return SourceTask
	case CauseClientClosed, CauseIdleTimeout:
		return SourceClient
	}
	return SourceInfrastructure
}

// Causes lists every cause, so counters can show each before it happens.
var Causes = []Cause{
	CauseCompleted, CauseMaxTurns, CauseUnparsedCalls, CauseNoToolCall, CauseAgentTimeout,
	CauseDeployFailed, CauseEnvCrashed, CauseTimeout, CausePluginDied, CauseServerShutdown,
	CauseUnscored, CauseClientClosed, CauseIdleTimeout,
}

// Result is an episode's record: what it played, where its time went and
// how it ended. Episode.Result gives a copy at any time; the engine's
// Observer gets the final one once the teardown finished.
type Result struct {
	EpisodeID string
	TaskID    string
	// Split and Index are the reset's ("" and nil when it named the task
	// by id); ToolFormat the format its replies were read in.
	Split      string
	Index      *int
	ToolFormat string
	Sandbox    string
	Began      time.Time // when Play made it (its queue wait is before)
	Ended      time.Time // when Close finished (zero until then)
	Spans      []Span    // in the order they ended
	Turns      int       // model replies taken so far
	Reward     *float64
	Metrics    map[string]float64 // the final observation's, when done
	// Outcome and Cause are set once the episode ended ("" while in play).
	Outcome Outcome
	Cause   Cause
	Error   string // the failure, when failed
	// Closed is set once Close finished: the teardown ran, its spans are in.
	Closed bool
	// Transcript is what the model saw and wrote; nil unless the engine's
	// Config.Transcripts is set.
	Transcript *Transcript
}

// Source is whose doing the episode's end was ("" while in play).
func (r Result) Source() Source {
	if r.Cause == "" {
		return ""
	}
	return SourceOf(r.Cause)
}

// Times sums the spans by phase.
func (r Result) Times() map[Phase]time.Duration {
	t := make(map[Phase]time.Duration, len(Phases))
	for _, s := range r.Spans {
		t[s.Phase] += s.Took
	}
	return t
}

// Seconds is Times in seconds, keyed by phase name, every phase present:
// what the final observation carries.
func (r Result) Seconds() map[string]float64 {
	t := r.Times()
	out := make(map[string]float64, len(Phases))
	for _, p := range Phases {
		out[string(p)] = t[p].Seconds()
	}
	return out
}

// Envs names the envs the episode's spans touched, sorted.
func (r Result) Envs() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range r.Spans {
		if s.Env != "" && !seen[s.Env] {
			seen[s.Env] = true
			out = append(out, s.Env)
		}
	}
	sort.Strings(out)
	return out
}

// Observer hears the engine's timings: each span as it ends (the warm
// pool's deploys included, with no episode) and each episode's final
// Result once it is closed. Calls come from many goroutines and must not
// block; the server's Prometheus metrics implement it.
type Observer interface {
	ObserveSpan(s Span)
	EpisodeEnded(r Result)
}

// Observers hands every span and Result to each observer in turn.
type Observers []Observer

func (o Observers) ObserveSpan(s Span) {
	for _, x := range o {
		x.ObserveSpan(s)
	}
}

func (o Observers) EpisodeEnded(r Result) {
	for _, x := range o {
		x.EpisodeEnded(r)
	}
}

// causeOf classifies a failure for the engine's Result. dflt is the cause
// when nothing more telling shows in err.
func causeOf(err error, dflt Cause) Cause {
	switch {
	case errors.Is(err, sdk.ErrCrashed):
		return CausePluginDied
	case errors.Is(err, envclient.ErrTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, errTimedOut):
		return CauseTimeout
	}
	return dflt
}

// errTimedOut marks a deploy that ran out of the deploy timeout (the
// plugin's error does not always say so); timeoutError carries it without
// changing the message.
var errTimedOut = errors.New("timed out")

type timeoutError struct{ error }

func (t timeoutError) Unwrap() error        { return t.error }
func (t timeoutError) Is(target error) bool { return target == errTimedOut }
