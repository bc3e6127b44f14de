package episode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

type phase int

const (
	phaseNew     phase = iota // made by Play, not started
	phasePlaying              // a turn is open, waiting for a reply
	phaseDone                 // scored
	phaseFailed               // ended with an error
	phaseClosed               // Close ran
)

func (p phase) String() string {
	return [...]string{"not started", "in play", "done", "failed", "closed"}[p]
}

// episode plays one task. Start, Step and the teardown hold busy, so they
// never overlap; Close cancels runCtx first so a Start or Step in flight
// returns promptly.
type episode struct {
	e        *Engine
	task     *bundle.Task
	id       string
	parser   toolformat.Parser
	maxTurns int
	log      hclog.Logger

	runCtx    context.Context
	cancelRun context.CancelFunc
	busy      chan struct{}
	closeOnce sync.Once
	closeErr  error

	mu        sync.Mutex // guards phase, envs, closed, teardowns
	phase     phase
	envs      []*liveEnv
	closed    bool
	teardowns []*teardown // of envs released so far
	scored    bool        // the episode ended with a reward
	res       Result      // its record: spans, outcome
	abandon   Cause       // why Close was called before the end ("" = the client's)
	// transcript is kept only with Config.Transcripts (nil: nothing is).
	transcript *Transcript
	// transcriptLeft is what the transcript may still hold (Limits.
	// TranscriptBytes at first); touched by the stepping goroutine only.
	transcriptLeft int64

	// Play state, touched only while holding busy.
	next     int // index of the next step to run
	turn     *turn
	capped   bool // no more turns open: max_turns reached, or a reply ended its turn without end_turn
	answers  map[string]string
	scores   map[string]float64
	replies  int
	calls    int // tool calls read from replies, end_turn aside
	unparsed int // tool calls that could not be read
	invalid  int // calls naming an unknown tool or failing its schema
	toolErrs int // calls the env answered with an error
	opened   bool
	endCause Cause             // how the turns ended, once they have
	parsed   toolformat.Parsed // the last reply's, kept for the transcript
}

// turn is an open prompt_agent step.
type turn struct {
	step    *bundle.Step
	offer   []*offered
	byName  map[string]*offered
	tools   []Tool              // offered, in order: what the parser reads and the model sees
	set     *toolformat.ToolSet // tools, as sent to the parser: once per plugin process
	endTurn bool
	replies int
	opened  time.Time // when the turn opened: its step's Timeout counts from here
}

// outOfTime reports whether the turn's own time (a Harbor task's agent
// timeout) has run out.
func (t *turn) outOfTime() bool {
	return t.step.Timeout > 0 && time.Since(t.opened) >= t.step.Timeout
}

func newEpisode(e *Engine, task *bundle.Task, id, format string, parser toolformat.Parser, maxTurns int, queued time.Duration) *episode {
	ctx, cancel := context.WithCancel(context.Background())
	ep := &episode{
		e: e, task: task, id: id, parser: parser, maxTurns: maxTurns,
		log:    e.log.With("episode", id, "task", task.ID, "tool_format", format),
		runCtx: ctx, cancelRun: cancel, busy: make(chan struct{}, 1),
		answers: map[string]string{}, scores: map[string]float64{},
		res: Result{EpisodeID: id, TaskID: task.ID, Sandbox: e.cfg.SandboxName, Began: time.Now()},
	}
	if queued > 0 {
		ep.record(Span{Phase: PhaseQueue, Env: task.FirstEnv(), Start: ep.res.Began.Add(-queued), Took: queued})
	}
	return ep
}

// record adds a span to the episode's Result and tells the observer.
func (ep *episode) record(s Span) {
	s.Sandbox = ep.e.cfg.SandboxName
	ep.mu.Lock()
	ep.res.Spans = append(ep.res.Spans, s)
	ep.mu.Unlock()
	ep.e.observe(s)
}

// timed records a span of phase on env from start until now.
func (ep *episode) timed(p Phase, env string, start time.Time) {
	ep.record(Span{Phase: p, Env: env, Start: start, Took: time.Since(start)})
}

// Result is the episode's record so far.
func (ep *episode) Result() Result {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	r := ep.res
	r.Spans = append([]Span(nil), r.Spans...)
	r.Transcript = ep.transcriptCopyLocked()
	return r
}

// Abandon records why the episode is closed before it ended.
func (ep *episode) Abandon(c Cause) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.abandon == "" {
		ep.abandon = c
	}
}

// spansSince sums the spans recorded after the first n, tool calls aside
// (they are part of a step, not beside it).
func (ep *episode) spansSince(n int) time.Duration {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	var d time.Duration
	for _, s := range ep.res.Spans[n:] {
		if s.Phase != PhaseTool {
			d += s.Took
		}
	}
	return d
}

func (ep *episode) spanCount() int {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return len(ep.res.Spans)
}

func (ep *episode) ID() string { return ep.id }

func (ep *episode) State() State {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return State{EpisodeID: ep.id, TaskID: ep.task.ID, Turn: ep.replies, Done: ep.scored, Started: ep.opened}
}

// acquire takes busy and merges ctx with the episode's run context.
func (ep *episode) acquire(ctx context.Context) (context.Context, func(), error) {
	select {
	case ep.busy <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-ep.runCtx.Done():
		return nil, nil, &Error{Code: CodeValidation, Err: errors.New("episode is closed")}
	}
	opCtx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(ep.runCtx, cancel)
	return opCtx, func() {
		stop()
		cancel()
		<-ep.busy
	}, nil
}

func (ep *episode) currentPhase() phase {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.phase
}

func (ep *episode) setPhase(p phase) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.phase != phaseClosed {
		ep.phase = p
	}
}

func (ep *episode) observation() Observation {
	return Observation{EpisodeID: ep.id, TaskID: ep.task.ID, Messages: []Message{}, Turn: ep.replies}
}

// Start deploys the env(s), runs setup and opens the first turn.
func (ep *episode) Start(ctx context.Context) (Observation, error) {
	ctx, release, err := ep.acquire(ctx)
	if err != nil {
		return Observation{}, err
	}
	defer release()
	if p := ep.currentPhase(); p != phaseNew {
		return Observation{}, &Error{Code: CodeValidation, Err: fmt.Errorf("episode %s is %s; Start runs once", ep.id, p)}
	}
	ep.setPhase(phasePlaying)
	ep.log.Debug("starting")
	obs := ep.observation()
	if err := ep.advance(ctx, &obs, false); err != nil {
		return Observation{}, ep.fail(ctx, err)
	}
	ep.keepOpening(&obs)
	return obs, nil
}

// Step answers one model reply.
func (ep *episode) Step(ctx context.Context, reply string) (Observation, error) {
	ctx, release, err := ep.acquire(ctx)
	if err != nil {
		return Observation{}, err
	}
	defer release()
	if p := ep.currentPhase(); p != phasePlaying || ep.turn == nil {
		return Observation{}, &Error{Code: CodeValidation, Err: fmt.Errorf("episode %s is %s; no turn is open", ep.id, p)}
	}
	obs := ep.observation()
	start, n := time.Now(), ep.spanCount()
	err = ep.step(ctx, reply, &obs)
	// The step is the reply's own time: verifiers and setup it led to
	// are their own phases.
	took := time.Since(start) - ep.spansSince(n)
	ep.record(Span{Phase: PhaseStep, Env: ep.task.FirstEnv(), Start: start, Took: took})
	if ep.transcript != nil {
		msgs := obs.Messages
		if err != nil {
			msgs = nil
		}
		ep.keepExchange(reply, ep.parsed, msgs, took)
		ep.parsed = toolformat.Parsed{}
	}
	if err != nil {
		return Observation{}, ep.fail(ctx, err)
	}
	if obs.Done {
		obs.Times = ep.Result().Seconds()
	}
	return obs, nil
}

func (ep *episode) step(ctx context.Context, reply string, obs *Observation) error {
	t := ep.turn
	ep.replies++
	t.replies++
	obs.Turn = ep.replies
	ep.mu.Lock()
	ep.res.Turns = ep.replies // Result reads it from any goroutine (the /ui page)
	ep.mu.Unlock()
	// The tool format trims the reply (end tokens, reasoning): it knows
	// its model's layout, and one place does it.
	parsed, err := ep.parse(ctx, reply, t.set)
	if err != nil {
		return &Error{Code: CodeExecution, Err: fmt.Errorf("reading the reply's tool calls: %w", err), Cause: causeOf(err, CausePluginDied)}
	}
	if ep.transcript != nil {
		ep.parsed = parsed
	}
	if ep.maxTurns > 0 && ep.replies >= ep.maxTurns {
		ep.capped = true
	}
	rep := newReplyReport(obs, ep.e.cfg.Limits)
	tool := rep.result
	for _, u := range parsed.Unparsed {
		ep.unparsed++
		rep.fail("this tool call could not be read: " + u.Reason)
	}
	ep.unparsed += rep.omitParsed(parsed)
	ended, viaEndTurn := false, false
	answer := strings.TrimSpace(parsed.Content)
	for _, c := range parsed.Calls {
		if ended {
			rep.fail(fmt.Sprintf("%s was not run: end_turn already ended the turn.", c.Name))
			continue
		}
		if c.Name == bundle.EndTurnTool && t.endTurn {
			ended, viaEndTurn = true, true
			answer = endTurnAnswer(c.Arguments)
			tool(ep.nextPrompt())
			continue
		}
		if err := ep.runCall(ctx, t, rep, c); err != nil {
			return err
		}
	}
	rep.finish()
	noCall := !ended && len(parsed.Calls) == 0 && len(parsed.Unparsed) == 0 && parsed.CallsOmitted == 0
	if noCall {
		// A reply without a tool call ends the turn it left open, and the
		// turns after it end empty (as SkyRL's page has it): only end_turn
		// hands the model the next prompt.
		ended = true
		ep.capped = true
	}
	if !ended && t.step.MaxTurns > 0 && t.replies >= t.step.MaxTurns {
		ended = true
	}
	outOfTime := !ended && t.outOfTime()
	if outOfTime {
		// The agent's time ends the episode's model turns, as a cap does.
		ended = true
		ep.capped = true
	}
	if !ended && !ep.capped {
		return nil
	}
	ep.endCause = ep.turnsEnd(viaEndTurn, noCall, t.endTurn, len(parsed.Unparsed) > 0 && len(parsed.Calls) == 0)
	if outOfTime {
		ep.endCause = CauseAgentTimeout
	}
	ep.answers[t.step.ID] = answer
	ep.turn = nil
	return ep.advance(ctx, obs, viaEndTurn)
}

// runCall runs one tool call of the reply and writes its answer to rep; a
// call refused (out of time, over the reply's limits, no such tool, bad
// arguments) is answered with why. The error is the episode's end: the
// env failed the call itself.
func (ep *episode) runCall(ctx context.Context, t *turn, rep *replyReport, c toolformat.Call) error {
	ep.calls++
	if t.outOfTime() {
		rep.fail(c.Name + " was not run: the task's time for the agent ran out.")
		return nil
	}
	if !rep.admit() {
		rep.fail(rep.notRun(c.Name))
		return nil
	}
	o := t.byName[c.Name]
	if o == nil {
		ep.invalid++
		rep.fail(fmt.Sprintf("there is no tool %q. The tools are: %s.", c.Name, strings.Join(offeredNames(t.offer), ", ")))
		return nil
	}
	args, err := ep.e.cfg.Limits.checkCall(o, c.Arguments)
	if err != nil {
		ep.invalid++
		rep.fail(fmt.Sprintf("invalid arguments for %s: %v", c.Name, err))
		return nil
	}
	if o.env == nil { // end_turn in a single-turn task cannot happen; guard anyway
		rep.fail(c.Name + " cannot be called now.")
		return nil
	}
	// The answer is read no further than this result may hold: the
	// rest streams past unread.
	callStart := time.Now()
	res, err := o.env.client.CallRawLimited(ctx, c.Name, args, ep.e.callTimeout(o.env), max(rep.resultRoom(), 1))
	ep.timed(PhaseTool, o.env.name, callStart)
	if err != nil {
		// The sandbox id names where the env ran (a pod, a container) so
		// an env that died mid-episode can be looked up.
		return &Error{Code: CodeExecution, Cause: causeOf(err, CauseEnvCrashed),
			Err: callFailure(fmt.Errorf("env %q (sandbox %s): %w", o.env.name, o.env.sb.ID, err), o.env.name, o.env.sb.ID, "the call of "+c.Name,
				ep.e.explain(ctx, o.env, err))}
	}
	prefix := ""
	if res.IsError {
		ep.toolErrs++
		prefix = "Error: "
	}
	rep.toolResult(prefix, res.Text, res.Cut)
	return nil
}

// parse reads the reply's tool calls within the parse time limit. A
// parse that runs out of it is stopped, and the reply is read as one call
// that could not be read: the model is told, and the episode goes on.
func (ep *episode) parse(ctx context.Context, reply string, set *toolformat.ToolSet) (toolformat.Parsed, error) {
	limit := ep.e.cfg.Limits.ParseTimeout
	pctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	parsed, err := toolformat.ParseWith(pctx, ep.parser, reply, set)
	if err == nil || ctx.Err() != nil || !errors.Is(pctx.Err(), context.DeadlineExceeded) {
		return parsed, err
	}
	ep.log.Warn("reading a reply's tool calls ran out of time; it was answered as unreadable",
		"reply_bytes", len(reply), "parse_timeout", limit, "error", err)
	return toolformat.Parsed{Unparsed: []toolformat.Unparsed{{Reason: fmt.Sprintf(
		"reading this reply's tool calls took longer than %s, the server's limit, so none of them was read or run; write fewer and shorter tool calls", limit)}}}, nil
}

// endTurnAnswer is end_turn's answer argument as text.
func endTurnAnswer(args json.RawMessage) string {
	var a struct {
		Answer json.RawMessage `json:"answer"`
	}
	if json.Unmarshal(args, &a) != nil || len(a.Answer) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(a.Answer, &s) == nil {
		return strings.TrimSpace(s)
	}
	return string(a.Answer) // a number or object: its JSON text
}

// nextPrompt is the result of end_turn: the prompt of the turn that opens
// next, or a closing line when none will.
func (ep *episode) nextPrompt() string {
	if !ep.capped {
		for i := ep.next; i < len(ep.task.Steps); i++ {
			if s := &ep.task.Steps[i]; s.Type == bundle.StepPromptAgent {
				return promptText(s, false)
			}
		}
	}
	return "The episode is over."
}

// promptText is a turn's prompt; a later turn's system prompt is folded
// into it, since chat templates take a system message only first.
func promptText(s *bundle.Step, first bool) string {
	if first || s.SystemPrompt == "" {
		return s.Prompt
	}
	return s.SystemPrompt + "\n\n" + s.Prompt
}

// advance runs steps until a turn opens (obs gets its prompt and tools) or
// the task ends (obs gets the reward). promptSent: the prompt of the next
// turn already went out as end_turn's result.
func (ep *episode) advance(ctx context.Context, obs *Observation, promptSent bool) error {
	steps := ep.task.Steps
	for ep.next < len(steps) {
		s := &steps[ep.next]
		ep.next++
		switch s.Type {
		case bundle.StepDeployEnv:
			if err := ep.deploy(ctx, s); err != nil {
				return &Error{Code: CodeDeploy, Err: err, Cause: causeOf(err, CauseDeployFailed)}
			}
		case bundle.StepCallTool:
			if ep.capped {
				continue // setup for turns that will not open
			}
			start := time.Now()
			err := ep.callSetup(ctx, s)
			ep.timed(PhaseSetup, s.Env, start)
			if err != nil {
				code, cause := CodeExecution, CauseEnvCrashed
				if !ep.opened {
					code, cause = CodeDeploy, CauseDeployFailed
				}
				return &Error{Code: code, Err: err, Cause: causeOf(err, cause)}
			}
		case bundle.StepPromptAgent:
			if ep.capped {
				continue
			}
			return ep.open(s, obs, promptSent)
		default:
			if !s.IsVerifier() {
				return &Error{Code: CodeExecution, Err: fmt.Errorf("step %q: unknown type %q", s.ID, s.Type)}
			}
			start := time.Now()
			scores, err := ep.verifyScores(ctx, s)
			ep.timed(PhaseVerify, s.Env, start)
			if err != nil {
				return &Error{Code: CodeUnscored, Err: fmt.Errorf("%s step %q: %w", s.Type, s.ID, err), Cause: causeOf(err, CauseUnscored)}
			}
			for id, score := range scores {
				ep.scores[id] = score
			}
			ep.log.Debug("verified", "step", s.ID, "scores", scores, "took", time.Since(start))
		}
	}
	return ep.finish(ctx, obs)
}

func (ep *episode) deploy(ctx context.Context, s *bundle.Step) error {
	labels := map[string]string{sandbox.LabelEpisode: ep.id, sandbox.LabelTask: ep.task.ID}
	le, err := ep.e.envFor(ctx, s.Env, labels, ep.record)
	if err != nil {
		var b *briefError
		if errors.As(err, &b) {
			return withBrief(fmt.Errorf("deploy_env step %q: %w", s.ID, err), "deploy_env step %q: %s", s.ID, b.brief)
		}
		return fmt.Errorf("deploy_env step %q: %w", s.ID, err)
	}
	ep.mu.Lock()
	if ep.closed {
		ep.mu.Unlock()
		// Close ran while we deployed: it could not see this env.
		terr := <-ep.e.retire([]*liveEnv{le}).done
		return errors.Join(fmt.Errorf("deploy_env step %q: episode closed", s.ID), terr)
	}
	ep.envs = append(ep.envs, le)
	ep.mu.Unlock()
	return nil
}

// env returns the deployed env of that name.
func (ep *episode) env(name string) (*liveEnv, error) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	for _, le := range ep.envs {
		if le.name == name {
			return le, nil
		}
	}
	return nil, fmt.Errorf("env %q is not deployed (yet)", name)
}

// open opens a prompt_agent turn.
func (ep *episode) open(s *bundle.Step, obs *Observation, promptSent bool) error {
	ep.mu.Lock()
	envs := append([]*liveEnv(nil), ep.envs...)
	ep.mu.Unlock()
	ts, err := ep.e.cfg.Bundle.Toolset(ep.task.Toolset)
	if err != nil {
		return &Error{Code: CodeExecution, Err: err}
	}
	offer, err := offerTools(s.Tools, ts.Hidden, envs, ts.EndTurn)
	if err != nil {
		return &Error{Code: CodeDeploy, Err: fmt.Errorf("prompt_agent step %q: %w", s.ID, err)}
	}
	t := &turn{step: s, offer: offer, byName: map[string]*offered{}, tools: toolsOf(offer), endTurn: ts.EndTurn, opened: time.Now()}
	t.set = toolformat.NewToolSet(t.tools)
	for _, o := range offer {
		t.byName[o.tool.Name] = o
	}
	ep.turn = t
	first := !ep.opened
	ep.opened = true
	if first && s.SystemPrompt != "" {
		obs.Messages = append(obs.Messages, Message{Role: "system", Content: s.SystemPrompt})
	}
	if !promptSent {
		obs.Messages = append(obs.Messages, Message{Role: "user", Content: promptText(s, first)})
	}
	obs.Tools = t.tools
	return nil
}

func offeredNames(offer []*offered) []string {
	names := make([]string, len(offer))
	for i, o := range offer {
		names[i] = o.tool.Name
	}
	return names
}

// finish scores the episode, tears it down and fills obs.
func (ep *episode) finish(ctx context.Context, obs *Observation) error {
	start := time.Now()
	r, err := ep.reward(ctx)
	if ep.e.cfg.Reward != nil {
		ep.timed(PhaseVerify, "", start) // the reward plugin's call
	}
	if err != nil {
		return &Error{Code: CodeUnscored, Err: err, Cause: causeOf(err, CauseUnscored)}
	}
	obs.Done = true
	obs.Reward = &r
	obs.Metrics = ep.metrics()
	cause := ep.endCause
	if cause == "" {
		cause = CauseCompleted // the task ended with no turn open (none, or all ended by end_turn)
	}
	ep.mu.Lock()
	ep.scored = true
	ep.res.Outcome, ep.res.Cause = OutcomeDone, cause
	ep.res.Reward, ep.res.Metrics, ep.res.Turns = &r, obs.Metrics, ep.replies
	ep.mu.Unlock()
	ep.setPhase(phaseDone)
	ep.log.Info("episode done", "reward", r, "turns", ep.replies, "tool_calls", ep.calls)
	ep.release(true)
	ep.e.forget(ep) // its envs are the engine's teardowns now
	return nil
}

func (ep *episode) metrics() map[string]float64 {
	m := map[string]float64{
		"tool_calls":     float64(ep.calls),
		"unparsed_calls": float64(ep.unparsed),
		"invalid_calls":  float64(ep.invalid),
		"tool_errors":    float64(ep.toolErrs),
		"turns":          float64(ep.replies),
		"failed":         0,
	}
	for id, v := range ep.scores {
		m["score/"+id] = v
	}
	return m
}

// fail ends the episode with err: tears down and returns err (with a code).
func (ep *episode) fail(ctx context.Context, err error) error {
	var coded *Error
	if !errors.As(err, &coded) {
		coded = &Error{Code: CodeExecution, Err: err}
	}
	if ep.runCtx.Err() != nil && errors.Is(err, context.Canceled) {
		coded = &Error{Code: coded.Code, Err: fmt.Errorf("episode closed: %w", coded.Err)}
	}
	err = coded
	cause := coded.Cause
	if cause == "" {
		cause = causeOf(coded.Err, codeCause(coded.Code))
	}
	ep.mu.Lock()
	if ep.res.Outcome == "" {
		ep.res.Outcome, ep.res.Cause, ep.res.Error, ep.res.Turns = OutcomeFailed, cause, err.Error(), ep.replies
		if ep.runCtx.Err() != nil || ctx.Err() != nil {
			// Cut short by Close or the caller: what ended it is why.
			ep.res.Outcome, ep.res.Cause = OutcomeAbandoned, ep.abandonCauseLocked()
		}
	}
	ep.mu.Unlock()
	ep.setPhase(phaseFailed)
	ep.turn = nil
	ep.log.Warn("episode failed", "error", err)
	ep.release(false)
	ep.e.forget(ep)
	return err
}

// release hands every env the episode deployed so far to the engine's
// background teardown, or, after an episode that ended with a reward
// (done), an env that asked for reuse to its reset (reuse.go): the final
// observation never waits for either. A failed or abandoned episode's
// envs are always torn down.
func (ep *episode) release(done bool) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if len(ep.envs) == 0 {
		return
	}
	var gone []*liveEnv
	for _, le := range ep.envs {
		if done && ep.e.reusable(le) {
			ep.e.recycle(le)
		} else {
			gone = append(gone, le)
		}
	}
	if len(gone) > 0 {
		ep.teardowns = append(ep.teardowns, ep.e.retire(gone))
	}
	ep.envs = nil
}

// tornDown waits for the episode's teardowns and returns their errors.
func (ep *episode) tornDown(ctx context.Context) error {
	ep.mu.Lock()
	tds := ep.teardowns
	ep.teardowns = nil
	ep.mu.Unlock()
	var errs []error
	for _, td := range tds {
		select {
		case err := <-td.done:
			errs = append(errs, err)
		case <-ctx.Done():
			return errors.Join(append(errs, fmt.Errorf("waiting for the teardown: %w", ctx.Err()))...)
		}
	}
	return errors.Join(errs...)
}

// Close tears the episode down, whatever its state. It makes a Start or
// Step in flight return, waits for it (up to the teardown timeout), then
// terminates every env. Later calls return the first call's result.
func (ep *episode) Close(ctx context.Context) error {
	ep.closeOnce.Do(func() {
		ep.cancelRun()
		waited := false
		select {
		case ep.busy <- struct{}{}:
			waited = true
		case <-time.After(ep.e.cfg.TeardownTimeout):
			ep.log.Warn("a call in flight did not return; tearing down anyway")
		}
		ep.mu.Lock()
		ep.closed = true
		ep.phase = phaseClosed
		ep.mu.Unlock()
		ep.release(false)
		ep.closeErr = ep.tornDown(ctx)
		ep.e.forget(ep)
		if waited {
			<-ep.busy
		}
		ep.mu.Lock()
		if ep.res.Outcome == "" {
			ep.res.Outcome, ep.res.Cause, ep.res.Turns = OutcomeAbandoned, ep.abandonCauseLocked(), ep.replies
		}
		ep.res.Closed = true
		ep.res.Ended = time.Now()
		ep.mu.Unlock()
		ep.e.ended(ep.Result())
	})
	return ep.closeErr
}

// abandonCauseLocked is why Close came before the end: what Abandon said,
// else the client's doing.
func (ep *episode) abandonCauseLocked() Cause {
	if ep.abandon != "" {
		return ep.abandon
	}
	return CauseClientClosed
}

// turnsEnd is the cause of the turns' end, from the reply that ended
// them; the reply that ends the episode's last turns has the last word.
// Otherwise a cap ended it (a turn's own max_turns, or the reset's).
func (ep *episode) turnsEnd(viaEndTurn, noCall, endTurn, unreadable bool) Cause {
	cut := CauseMaxTurns
	if unreadable {
		cut = CauseUnparsedCalls
	}
	switch {
	case noCall && endTurn && ep.laterTurns():
		return CauseNoToolCall // turns were left unplayed
	case noCall:
		return CauseCompleted // a turn ended by a plain answer, as single turns are
	case viaEndTurn && (!ep.capped || !ep.laterTurns()):
		return CauseCompleted
	}
	return cut
}

// laterTurns says whether a prompt_agent step follows the open one.
func (ep *episode) laterTurns() bool {
	for i := ep.next; i < len(ep.task.Steps); i++ {
		if ep.task.Steps[i].Type == bundle.StepPromptAgent {
			return true
		}
	}
	return false
}

// codeCause is the cause a failure of code stands for when its error says
// nothing more telling.
func codeCause(c Code) Cause {
	switch c {
	case CodeDeploy:
		return CauseDeployFailed
	case CodeUnscored:
		return CauseUnscored
	}
	return CauseEnvCrashed
}
