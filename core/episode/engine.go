package episode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/sdk/reward"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// Default timeouts, used where Config leaves one zero.
const (
	DefaultDeployTimeout   = 2 * time.Minute
	DefaultToolCallTimeout = time.Minute
	DefaultVerifyTimeout   = 2 * time.Minute
	DefaultTeardownTimeout = 30 * time.Second
	DefaultTeardownRetry   = 5 * time.Minute
	// DefaultToolsetRetryAfter is how long a toolset whose listing failed
	// answers with that failure before deploying its envs again.
	DefaultToolsetRetryAfter = 30 * time.Second
)

// Config is what an Engine plays episodes with.
type Config struct {
	Bundle  *bundle.Bundle
	Sandbox sandbox.Driver
	// ToolFormat returns the parser of a tool-call format by name.
	ToolFormat func(name string) (toolformat.Parser, error)
	// DefaultToolFormat is used when a request names none.
	DefaultToolFormat string
	// Reward combines a task's scores. Nil is fine when every task has one
	// score or RewardStep is set.
	Reward reward.Combiner
	// RewardStep picks one verifier's score as the reward (--reward score:<id>).
	RewardStep string
	// Labels go on every sandbox (e.g. agentenv.instance); the engine adds
	// agentenv.episode and agentenv.task.
	Labels map[string]string
	Logger hclog.Logger
	// SandboxName names the sandbox in spans and Results (the plugin's
	// name: local, ecs, ...).
	SandboxName string
	// Observer, when set, hears every span and every episode's Result
	// (the server's metrics).
	Observer Observer
	// Transcripts keeps each episode's prompt, replies and answers in its
	// Result (Result.Transcript), for core/transcript; off, a step keeps
	// nothing of them.
	Transcripts bool

	DeployTimeout   time.Duration // deploy + readiness + listing tools, per env
	ToolCallTimeout time.Duration // one tool call: setup or the model's
	VerifyTimeout   time.Duration // one verifier
	TeardownTimeout time.Duration // one Terminate call
	// TeardownRetry bounds how long a failed teardown (the sandbox plugin
	// crashed or is restarting) is retried in the background (0 = 5m).
	TeardownRetry time.Duration
	// ToolsetRetryAfter is how long a failed toolset listing is answered
	// from memory before it is tried again (0 = 30s).
	ToolsetRetryAfter time.Duration

	Limits Limits // what one reply may cost; zero fields take the defaults

	// Warm is how many sandboxes of each env the engine keeps deployed,
	// ready and unused, for resets to take (0 = none; see pool.go). Envs
	// reset for reuse (reuse.go) count towards it.
	Warm int
	// WarmLimit caps the engine's live sandboxes (episodes', warm ones,
	// ones being torn down) that the warm pool may bring about: the pool
	// deploys only below it (0 = no cap). serve sets it to
	// --max-concurrent-envs, so warm sandboxes count against capacity.
	WarmLimit int
}

// Engine plays a bundle's tasks as episodes. It implements Player and is
// safe for concurrent use.
type Engine struct {
	cfg Config
	log hclog.Logger

	// teardowns counts the background teardowns running (a WaitGroup may
	// not gain work while Idle waits on it; this may).
	teardowns inflight
	closing   chan struct{} // closed by Close: retries stop waiting between tries

	toolsMu sync.Mutex
	tools   map[string]*toolsetEntry

	liveMu   sync.Mutex
	live     map[*episode]struct{} // episodes that may hold envs
	shutdown bool

	// sandboxes counts the sandboxes deploying, live or being torn down.
	sandboxes atomic.Int64
	pool      *warmPool // nil without Config.Warm
}

var _ Player = (*Engine)(nil)

// NewEngine checks cfg and returns an engine. A bundle whose tasks cannot
// be rewarded under cfg (several scores and no reward) is refused here,
// naming the tasks, so nothing starts.
func NewEngine(cfg Config) (*Engine, error) {
	switch {
	case cfg.Bundle == nil:
		return nil, errors.New("episode engine: no bundle")
	case cfg.Sandbox == nil:
		return nil, errors.New("episode engine: no sandbox")
	case cfg.ToolFormat == nil:
		return nil, errors.New("episode engine: no tool formats")
	case cfg.Reward != nil && cfg.RewardStep != "":
		return nil, fmt.Errorf("episode engine: give a reward plugin or a score step (score:%s), not both", cfg.RewardStep)
	case cfg.Warm < 0 || cfg.WarmLimit < 0:
		return nil, fmt.Errorf("episode engine: warm %d and warm limit %d must not be negative", cfg.Warm, cfg.WarmLimit)
	}
	spec := ""
	if cfg.RewardStep != "" {
		spec = bundle.RewardScorePrefix + cfg.RewardStep
	} else if cfg.Reward != nil {
		spec = "plugin"
	}
	if err := cfg.Bundle.CheckReward(spec); err != nil {
		return nil, fmt.Errorf("episode engine: %w", err)
	}
	if cfg.DefaultToolFormat != "" {
		if _, err := cfg.ToolFormat(cfg.DefaultToolFormat); err != nil {
			return nil, fmt.Errorf("episode engine: default tool format %q: %w", cfg.DefaultToolFormat, err)
		}
	}
	defaults := []struct {
		d   *time.Duration
		def time.Duration
	}{
		{&cfg.DeployTimeout, DefaultDeployTimeout}, {&cfg.ToolCallTimeout, DefaultToolCallTimeout},
		{&cfg.VerifyTimeout, DefaultVerifyTimeout}, {&cfg.TeardownTimeout, DefaultTeardownTimeout},
		{&cfg.TeardownRetry, DefaultTeardownRetry}, {&cfg.ToolsetRetryAfter, DefaultToolsetRetryAfter},
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if err := cfg.Limits.check(); err != nil {
		return nil, fmt.Errorf("episode engine: %w", err)
	}
	for _, d := range defaults {
		if *d.d <= 0 {
			*d.d = d.def
		}
	}
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	e := &Engine{cfg: cfg, log: log, tools: map[string]*toolsetEntry{},
		live: map[*episode]struct{}{}, closing: make(chan struct{})}
	if cfg.Warm > 0 || e.anyReuse() {
		e.pool = newWarmPool(e)
		go e.pool.run()
	}
	return e, nil
}

// room says whether the warm pool may deploy one more sandbox.
func (e *Engine) room() bool {
	return e.cfg.WarmLimit == 0 || e.sandboxes.Load() < int64(e.cfg.WarmLimit)
}

// over says whether the engine holds more sandboxes than WarmLimit.
func (e *Engine) over() bool {
	return e.cfg.WarmLimit > 0 && e.sandboxes.Load() > int64(e.cfg.WarmLimit)
}

// WarmReady is how many sandboxes of env the warm pool holds ready, and
// how many it is deploying.
func (e *Engine) WarmReady(env string) (ready, deploying int) {
	if e.pool == nil {
		return 0, 0
	}
	return e.pool.stats(env)
}

// Play resolves req to a task and returns its episode, ready to Start.
func (e *Engine) Play(req Request) (Episode, error) {
	task, err := e.resolve(req)
	if err != nil {
		return nil, err
	}
	format := req.ToolFormat
	if format == "" {
		format = e.cfg.DefaultToolFormat
	}
	if format == "" {
		return nil, &Error{Code: CodeValidation, Err: errors.New("no tool_format given and the server has no default")}
	}
	parser, err := e.cfg.ToolFormat(format)
	if err != nil {
		return nil, &Error{Code: CodeValidation, Err: fmt.Errorf("tool_format %q: %w", format, err)}
	}
	if req.MaxTurns < 0 {
		return nil, &Error{Code: CodeValidation, Err: fmt.Errorf("max_turns %d: must be 0 (no cap) or more", req.MaxTurns)}
	}
	maxTurns := req.MaxTurns
	if cap := e.cfg.Limits.MaxTurns; cap > 0 && (maxTurns == 0 || maxTurns > cap) {
		maxTurns = cap
	}
	id := req.EpisodeID
	if id == "" {
		id = newEpisodeID()
	} else if err := checkEpisodeID(id); err != nil {
		return nil, &Error{Code: CodeValidation, Err: err}
	}
	ep := newEpisode(e, task, id, format, parser, maxTurns, req.Queued)
	ep.res.Split, ep.res.ToolFormat = req.Split, format
	if req.Index != nil {
		i := *req.Index
		ep.res.Index = &i
		if ep.res.Split == "" {
			ep.res.Split = bundle.SplitAll
		}
	}
	if e.cfg.Transcripts {
		ep.transcript, ep.transcriptLeft = &Transcript{}, e.cfg.Limits.TranscriptBytes
	}
	e.liveMu.Lock()
	defer e.liveMu.Unlock()
	if e.shutdown {
		return nil, &Error{Code: CodeValidation, Err: errors.New("the engine is shutting down")}
	}
	e.live[ep] = struct{}{}
	return ep, nil
}

// observe tells the observer of a span.
func (e *Engine) observe(s Span) {
	if e.cfg.Observer != nil {
		s.Sandbox = e.cfg.SandboxName
		e.cfg.Observer.ObserveSpan(s)
	}
}

// ended tells the observer of an episode's final Result.
func (e *Engine) ended(r Result) {
	if e.cfg.Observer != nil {
		e.cfg.Observer.EpisodeEnded(r)
	}
}

// forget drops an episode that holds no envs any more.
func (e *Engine) forget(ep *episode) {
	e.liveMu.Lock()
	delete(e.live, ep)
	e.liveMu.Unlock()
}

// Close refuses new episodes, tears the warm pool down and closes every
// live episode (tearing down its envs), concurrently; it returns once all
// are torn down, background teardowns (of episodes that ended) included,
// or ctx ends.
func (e *Engine) Close(ctx context.Context) error {
	e.liveMu.Lock()
	if !e.shutdown {
		close(e.closing)
	}
	e.shutdown = true
	eps := make([]*episode, 0, len(e.live))
	for ep := range e.live {
		eps = append(eps, ep)
	}
	e.liveMu.Unlock()
	if e.pool != nil {
		e.pool.close(ctx)
	}
	errs := make([]error, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = ep.Close(ctx)
		}()
	}
	wg.Wait()
	if err := e.Idle(ctx); err != nil {
		errs = append(errs, fmt.Errorf("tearing down envs of ended episodes: %w", err))
	}
	return errors.Join(errs...)
}

// Idle returns once no teardown is running in the background (every env
// of an ended episode is gone), or ctx ends.
func (e *Engine) Idle(ctx context.Context) error {
	select {
	case <-e.teardowns.idle():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for teardowns: %w", ctx.Err())
	}
}

// inflight counts running work; idle's channel is closed while none runs.
type inflight struct {
	mu   sync.Mutex
	n    int
	zero chan struct{}
}

func (f *inflight) add() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		f.zero = make(chan struct{})
	}
	f.n++
}

func (f *inflight) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n--; f.n == 0 {
		close(f.zero)
	}
}

func (f *inflight) idle() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	return f.zero
}

func (e *Engine) resolve(req Request) (*bundle.Task, error) {
	b := e.cfg.Bundle
	switch {
	case req.TaskID != "" && (req.Split != "" || req.Index != nil):
		return nil, &Error{Code: CodeValidation, Err: errors.New("give task_id or split and index, not both")}
	case req.TaskID != "":
		t, err := b.Task(req.TaskID)
		if err != nil {
			return nil, &Error{Code: CodeNotFound, Err: err}
		}
		return t, nil
	case req.Split == "" && req.Index == nil:
		return nil, &Error{Code: CodeValidation, Err: errors.New("no task: give task_id, or split and index")}
	case req.Index == nil:
		return nil, &Error{Code: CodeValidation, Err: fmt.Errorf("split %q given without an index", req.Split)}
	}
	split := req.Split
	if split == "" {
		split = bundle.SplitAll
	}
	if *req.Index < 0 {
		return nil, &Error{Code: CodeValidation, Err: fmt.Errorf("index %d: must be 0 or more", *req.Index)}
	}
	if _, err := b.Split(split); err != nil {
		return nil, &Error{Code: CodeNotFound, Err: err}
	}
	t, err := b.TaskAt(split, *req.Index)
	if err != nil {
		return nil, &Error{Code: CodeNotFound, Err: err}
	}
	return t, nil
}

func newEpisodeID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "ep-" + hex.EncodeToString(b[:])
}

// MaxEpisodeIDLen is the longest episode_id a reset may give, as the
// protocol and /schema say.
const MaxEpisodeIDLen = 255

// checkEpisodeID keeps ids safe for labels, logs and file names.
func checkEpisodeID(id string) error {
	if len(id) > MaxEpisodeIDLen {
		return fmt.Errorf("episode_id is %d characters; at most %d", len(id), MaxEpisodeIDLen)
	}
	for _, r := range id {
		ok := r == '-' || r == '_' || r == '.' || r == ':' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return fmt.Errorf("episode_id %q: use letters, digits and - _ . : only", id)
		}
	}
	return nil
}

// Prepare asks the sandbox to prepare every env of the bundle (build its
// binary or image), so the first episodes do not wait for builds. The
// sandbox SDK prepares each env once per plugin process and also before an
// env's first deploy, so Prepare is an optimisation, never a requirement.
func (e *Engine) Prepare(ctx context.Context) error {
	prep, ok := e.cfg.Sandbox.(sandbox.Preparer)
	if !ok {
		return nil
	}
	var errs []error
	for _, name := range sortedEnvNames(e.cfg.Bundle) {
		env := e.cfg.Bundle.Envs[name]
		if err := prep.Prepare(ctx, e.spec(env, nil)); err != nil {
			errs = append(errs, fmt.Errorf("preparing env %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// EnvNames lists the bundle's envs in the order Prepare builds them.
func (e *Engine) EnvNames() []string { return sortedEnvNames(e.cfg.Bundle) }

// PrepareEnv builds what env name needs, as Prepare does for every env.
func (e *Engine) PrepareEnv(ctx context.Context, name string) error {
	env, ok := e.cfg.Bundle.Envs[name]
	if !ok {
		return fmt.Errorf("preparing env %q: the bundle has no such env", name)
	}
	prep, ok := e.cfg.Sandbox.(sandbox.Preparer)
	if !ok {
		return nil
	}
	if err := prep.Prepare(ctx, e.spec(env, nil)); err != nil {
		return fmt.Errorf("preparing env %q: %w", name, err)
	}
	return nil
}

func sortedEnvNames(b *bundle.Bundle) []string {
	names := make([]string, 0, len(b.Envs))
	for n := range b.Envs {
		names = append(names, n)
	}
	sortStrings(names)
	return names
}
