// Package eval scores a model on a split of a served bundle: it plays
// every task of the split on an agentenv server (through package client,
// as a trainer's rollouts do) against a model behind an OpenAI-compatible
// chat endpoint, and writes one JSON line per rollout. The model sees the
// prompt `agentenv skyrl rows` writes — the task's tools in the system
// message as its chat template renders them, the same code — and its
// replies go to the server as written, where the tool-call format reads
// them, so an eval scores the model as training plays it.
//
// A rollout the env fails (a deploy, a tool call, a server gone) is played
// again on a new episode; one the model fails (an endpoint error, a
// timeout, garbage) is recorded as failed. The results file is appended a
// whole line at a time, so an eval killed at any point goes on with
// Options.Resume, neither losing nor repeating a rollout. WriteSFT turns
// the best rollouts into a conversational SFT dataset.
package eval

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/client"
	"github.com/agentenv/agentenv/core/dataset/skyrl"
	"github.com/agentenv/agentenv/core/firstparty"
	"github.com/agentenv/agentenv/sdk"
)

// Options say what to evaluate and how.
type Options struct {
	// Server is the agentenv server's URL; Token its token ("" for none).
	Server, Token string
	// Split is the split to play; Limit, when > 0, plays only its first
	// Limit tasks.
	Split string
	Limit int
	// Samples is the rollouts per task.
	Samples int
	// Concurrency is the rollouts played at once.
	Concurrency int
	// MaxTurns ends and scores an episode after this many replies (0: the
	// task's own limit).
	MaxTurns int
	// ToolFormat is the format the server reads replies in ("" for its
	// default).
	ToolFormat string
	// Attempts is the episodes a rollout the env fails may take; no new
	// one starts ResetTimeout after the rollout began, and a reset waits
	// for a busy or restarting server until then.
	Attempts     int
	ResetTimeout time.Duration
	// Model answers; ModelName is recorded with each rollout.
	Model     Model
	ModelName string
	// Template renders the prompts, with Kwargs (the chat template kwargs).
	Template *skyrl.ChatTemplate
	Kwargs   skyrl.Kwargs
	// Out is the results file (JSON lines). Resume goes on with the
	// rollouts in it; RetryFailed (with Resume) plays its failed ones
	// again.
	Out                 string
	Resume, RetryFailed bool
	// SFTOut, when set, is written at the end with the rollouts scoring at
	// least SFTMinReward (WriteSFT).
	SFTOut       string
	SFTMinReward float64
	// Progress, when set, is called once at the start and after each
	// rollout.
	Progress func(Progress)
	// OnPreparing, when set, hears what a server that still builds its
	// envs builds, while Run waits for it (else it is logged at info).
	OnPreparing func(msg string)
	Log         hclog.Logger
}

// Progress is how far an eval is.
type Progress struct {
	Done, Total, Failed int
	// MeanReward is over the rollouts done, a failed one counting 0.
	MeanReward float64
}

// stepTimeout bounds one step on the server: the server bounds each tool
// call itself; this catches a server that stopped answering.
const stepTimeout = 10 * time.Minute

func (o *Options) check() error {
	switch {
	case o.Split == "":
		return errors.New("--split: name the split to play")
	case o.Samples < 1:
		return fmt.Errorf("--samples %d: want at least 1", o.Samples)
	case o.Concurrency < 1:
		return fmt.Errorf("--concurrency %d: want at least 1", o.Concurrency)
	case o.MaxTurns < 0:
		return fmt.Errorf("--max-turns %d: want 0 (the task's limit) or more", o.MaxTurns)
	case o.Limit < 0:
		return fmt.Errorf("--limit %d: want 0 (every task) or more", o.Limit)
	case o.Attempts < 1:
		return fmt.Errorf("--attempts %d: want at least 1", o.Attempts)
	case o.ResetTimeout <= 0:
		return fmt.Errorf("--reset-timeout %s: want a positive time", o.ResetTimeout)
	case o.RetryFailed && !o.Resume:
		return errors.New("--retry-failed goes with --resume")
	case o.Model == nil || o.Template == nil || o.Out == "":
		return errors.New("eval: Model, Template and Out are required")
	}
	return nil
}

// job is one rollout to play.
type job struct {
	entry  skyrl.TaskEntry
	sample int
}

// runner is one eval in progress.
type runner struct {
	o   Options
	cat *skyrl.HTTPCatalog
	out *results
	log hclog.Logger

	toolsMu sync.Mutex
	tools   map[string]*toolsEntry  // by toolset
	prompts map[string]*promptEntry // by task id
	cancel  context.CancelCauseFunc // stops the run on a fatal error

	mu    sync.Mutex
	tally *tally
	done  int
	total int
}

// toolsEntry is a toolset's tools, listed by the first rollout that needs
// them while the others wait; a failed listing (a deploy) is not kept, so
// the next rollout lists again.
type toolsEntry struct {
	mu     sync.Mutex
	tools  skyrl.Tools
	listed bool
}

type promptEntry struct {
	once     sync.Once
	messages []Message
	err      error
}

// errFatal marks an error that stops the whole eval: the same for every
// rollout (a refused reset, a template that cannot render the tools).
type errFatal struct{ err error }

func (e *errFatal) Error() string { return e.err.Error() }
func (e *errFatal) Unwrap() error { return e.err }

// Run plays the split and returns the summary of every rollout in the
// results file. It returns an error, and no summary, when it cannot start
// (a bad flag, the server unreachable, a results file of another eval),
// and the summary with an error when it stopped early: ctx ended
// (Summary.Interrupted) or every rollout would fail alike.
func Run(ctx context.Context, o Options) (*Summary, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = hclog.NewNullLogger()
	}
	// The plugin host's resolution of names (qwen3coder is qwen3_coder), so
	// the results and --resume name a format one way.
	o.ToolFormat = firstparty.CanonicalName(sdk.KindToolFormat, o.ToolFormat)
	cat, err := skyrl.NewHTTPCatalog(o.Server, o.Token)
	if err != nil {
		return nil, err
	}
	cat.OnPreparing = o.OnPreparing
	if cat.OnPreparing == nil {
		cat.OnPreparing = func(msg string) { o.Log.Info("waiting for the server", "status", msg) }
	}
	entries, err := listTasks(ctx, cat, o.Split, o.Limit)
	if err != nil {
		return nil, err
	}
	out, st, err := openResults(o.Out, o.Resume, o.RetryFailed, func(r *Record) error {
		if r.Split != o.Split || r.Model != o.ModelName || r.ToolFormat != o.ToolFormat {
			return fmt.Errorf("a rollout of split %q, model %q, tool format %q; this eval is split %q, model %q, tool format %q: --resume goes on with the same eval",
				r.Split, r.Model, r.ToolFormat, o.Split, o.ModelName, o.ToolFormat)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer out.close()

	r := &runner{o: o, cat: cat, out: out, log: o.Log, tally: newTally(),
		tools: map[string]*toolsEntry{}, prompts: map[string]*promptEntry{}}
	done := map[key]bool{}
	for i := range st.records {
		r.tally.add(&st.records[i])
		done[st.records[i].key()] = true
	}
	r.tally.s.Resumed, r.tally.s.Retried = len(st.records), st.retried
	if st.dropped > 0 {
		o.Log.Warn("removed a half-written last line from the results file; its rollout plays again", "file", o.Out)
	}
	var jobs []job
	for s := range o.Samples {
		for _, e := range entries {
			if !done[key{e.TaskID, s}] {
				jobs = append(jobs, job{e, s})
			}
		}
	}
	r.done, r.total = len(st.records), len(st.records)+len(jobs)
	r.progress()

	start := time.Now()
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.cancel = cancel
	r.runJobs(runCtx, jobs)
	wall := time.Since(start)

	r.mu.Lock()
	sum := r.tally.summary()
	r.mu.Unlock()
	sum.Split, sum.Model, sum.ToolFormat = o.Split, o.ModelName, o.ToolFormat
	sum.Expected = len(entries) * o.Samples
	sum.Played = sum.Rollouts - sum.Resumed
	sum.WallS = wall.Seconds()
	if cause := context.Cause(runCtx); cause != nil {
		sum.Interrupted = true
		var fatal *errFatal
		if errors.As(cause, &fatal) {
			return &sum, fatal.err
		}
		return &sum, fmt.Errorf("interrupted after %d of %d rollouts: %w; run again with --resume to play the rest", sum.Rollouts, sum.Expected, cause)
	}
	if o.SFTOut != "" {
		if sum.SFT, err = WriteSFT(o.Out, o.SFTOut, o.SFTMinReward); err != nil {
			return &sum, err
		}
	}
	return &sum, nil
}

// listTasks lists the split's tasks, its first limit when limit > 0.
func listTasks(ctx context.Context, cat *skyrl.HTTPCatalog, split string, limit int) ([]skyrl.TaskEntry, error) {
	splits, err := cat.Splits(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the splits: %w", err)
	}
	var names []string
	for _, s := range splits {
		names = append(names, s.Name)
		if s.Name != split {
			continue
		}
		if limit > 0 && limit < s.Size {
			s.Size = limit
		}
		return skyrl.ListSplit(ctx, cat, s)
	}
	return nil, fmt.Errorf("--split %s: the server has no such split; it has %s", split, strings.Join(names, ", "))
}

// runJobs plays the jobs on Concurrency workers, each with its own
// session.
func (r *runner) runJobs(ctx context.Context, jobs []job) {
	c, err := client.New(r.o.Server, client.Options{Token: r.o.Token})
	if err != nil {
		r.cancel(&errFatal{err})
		return
	}
	next := make(chan job)
	var wg sync.WaitGroup
	for range min(r.o.Concurrency, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &worker{r: r, c: c}
			defer w.close()
			for j := range next {
				w.run(ctx, j)
			}
		}()
	}
feed:
	for _, j := range jobs {
		select {
		case next <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
}

// record writes a finished rollout and counts it.
func (r *runner) record(rec *Record) error {
	if err := r.out.append(rec); err != nil {
		return err
	}
	r.mu.Lock()
	light := *rec
	light.Messages, light.Turns = nil, nil
	r.tally.add(&light)
	r.done++
	r.mu.Unlock()
	r.progress()
	return nil
}

func (r *runner) progress() {
	if r.o.Progress == nil {
		return
	}
	r.mu.Lock()
	p := Progress{Done: r.done, Total: r.total, Failed: r.tally.s.Failed, MeanReward: r.tally.mean()}
	r.mu.Unlock()
	r.o.Progress(p)
}

// toolsetTools returns a toolset's tools as the catalogue sends them,
// listed once (the server deploys an env to list them). A listing that
// failed is an env failure of the rollout; tools that do not parse stop
// the eval.
func (r *runner) toolsetTools(ctx context.Context, toolset string) (skyrl.Tools, error) {
	r.toolsMu.Lock()
	e := r.tools[toolset]
	if e == nil {
		e = &toolsEntry{}
		r.tools[toolset] = e
	}
	r.toolsMu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.listed {
		return e.tools, nil
	}
	raw, err := r.cat.Tools(ctx, toolset)
	if err != nil {
		return skyrl.Tools{}, fmt.Errorf("toolset %s: list its tools: %w", toolset, err)
	}
	if e.tools, err = skyrl.ParseTools(raw, "toolset "+toolset+"'s tools"); err != nil {
		return skyrl.Tools{}, &errFatal{err}
	}
	e.listed = true
	return e.tools, nil
}

// prompt returns the task's opening messages with its toolset's tools in
// the system message, as `agentenv skyrl rows` writes them; rendered once
// per task. A template that cannot render them stops the eval.
func (r *runner) prompt(ctx context.Context, e skyrl.TaskEntry, opening []client.Message) ([]Message, error) {
	tools, err := r.toolsetTools(ctx, e.Toolset)
	if err != nil {
		return nil, err
	}
	r.toolsMu.Lock()
	p := r.prompts[e.TaskID]
	if p == nil {
		p = &promptEntry{}
		r.prompts[e.TaskID] = p
	}
	r.toolsMu.Unlock()
	p.once.Do(func() {
		msgs := make([]skyrl.Message, len(opening))
		for i, m := range opening {
			msgs[i] = skyrl.Message{Role: m.Role, Content: m.Content}
		}
		rendered, err := r.o.Template.TaskPrompt(e.TaskID, e.Toolset, msgs, tools, r.o.Kwargs)
		if err != nil {
			p.err = &errFatal{err}
			return
		}
		for _, m := range rendered.Messages {
			p.messages = append(p.messages, Message{Role: m.Role, Content: m.Content})
		}
	})
	if p.err != nil {
		return nil, p.err
	}
	return append([]Message(nil), p.messages...), nil
}
