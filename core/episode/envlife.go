package episode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/envclient"
	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// liveEnv is a deployed env: its sandbox, MCP session and tools.
type liveEnv struct {
	name    string
	sb      sandbox.Sandbox
	counted bool              // in Engine.sandboxes until torn down
	client  *envclient.Client // nil until connected
	tools   []Tool
	// rec records its spans: the episode's that holds it; nil = the
	// engine's observer only (warm, or listing a toolset).
	rec func(Span)
	// def is the env definition it was deployed from; served counts the
	// episodes it was given to, resetAt when its last reset passed (reuse.go).
	def     *bundle.Env
	served  int
	resetAt time.Time
}

// spec is what the sandbox deploys for env, with the engine's labels and
// labels added.
func (e *Engine) spec(env *bundle.Env, labels map[string]string) sandbox.Spec {
	all := make(map[string]string, len(e.cfg.Labels)+len(labels)+1)
	for k, v := range e.cfg.Labels {
		all[k] = v
	}
	for k, v := range labels {
		all[k] = v
	}
	vars := env.EnvVars
	if env.Reuse > 1 { // the env serves its reset tool only when told its name
		vars = make(map[string]string, len(env.EnvVars)+1)
		for k, v := range env.EnvVars {
			vars[k] = v
		}
		vars[bundle.ResetToolVar] = env.ResetTool
	}
	return sandbox.Spec{
		Env: env.Name, Dir: env.Dir, Image: env.Image, Command: env.Command, Build: env.Build,
		Port: env.Port, EnvVars: vars, CPU: env.CPU, MemoryMB: env.MemoryMB, Labels: all,
		Terminal: terminalSpec(env), StorageMB: env.StorageMB, NoInternet: env.NoInternet,
		BuildTimeout: env.BuildTimeout,
	}
}

func terminalSpec(env *bundle.Env) *sandbox.Terminal {
	if !env.Terminal {
		return nil
	}
	return &sandbox.Terminal{Workdir: env.Workdir}
}

// envFor gives an episode env name: a ready one from the warm pool when
// there is one, else a fresh deploy.
// rec records the episode's spans (taking a warm sandbox is its deploy).
func (e *Engine) envFor(ctx context.Context, name string, labels map[string]string, rec func(Span)) (*liveEnv, error) {
	if e.pool != nil {
		start := time.Now()
		if le := e.pool.take(ctx, name); le != nil {
			le.rec = rec
			le.served++
			rec(Span{Phase: PhaseDeploy, Env: name, Start: start, Took: time.Since(start)})
			if le.served > 1 {
				e.observeReuse(ReuseEvent{Kind: ReuseTaken, Env: name, Depth: le.served})
				e.log.Debug("took a reset env", "episode", labels[sandbox.LabelEpisode], "env", name, "sandbox", le.sb.ID, "episodes_served", le.served)
			} else {
				e.log.Info("took a warm sandbox", "episode", labels[sandbox.LabelEpisode], "env", name, "sandbox", le.sb.ID)
			}
			return le, nil
		}
	}
	le, err := e.deployEnv(ctx, name, labels, rec)
	if le != nil {
		le.served = 1
	}
	return le, err
}

// deployEnv deploys an env, waits for its MCP server (the one readiness
// check: sandboxes do not speak MCP) and lists its tools, within the
// deploy timeout. On failure nothing is left running.
func (e *Engine) deployEnv(ctx context.Context, name string, labels map[string]string, rec func(Span)) (*liveEnv, error) {
	e.sandboxes.Add(1)
	return e.deployCounted(ctx, name, labels, rec)
}

// deployCounted is deployEnv for a sandbox already counted in
// e.sandboxes; a failed deploy uncounts it. rec (nil: the observer only)
// records its deploy and ready spans, and later its teardown.
func (e *Engine) deployCounted(ctx context.Context, name string, labels map[string]string, rec func(Span)) (*liveEnv, error) {
	if rec == nil {
		rec = e.observe
	}
	env, ok := e.cfg.Bundle.Envs[name]
	if !ok {
		e.uncount()
		return nil, fmt.Errorf("no env %q in the bundle", name)
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.DeployTimeout)
	defer cancel()
	spec := e.spec(env, labels)
	// A nonce per deploy finds the sandbox should the call fail after the
	// plugin deployed it (a deadline racing the reply, a plugin crash).
	nonce := newEpisodeID()
	spec.Labels[sandbox.LabelDeploy] = nonce
	spec.Labels[sandbox.LabelCreated] = time.Now().UTC().Format(time.RFC3339)
	start := time.Now()
	sb, err := e.cfg.Sandbox.Deploy(ctx, spec)
	if err != nil && errors.Is(err, sdk.ErrCrashed) && ctx.Err() == nil {
		// One crash of the sandbox plugin fails every deploy in flight
		// across the server: each goes again, once, on the restarted
		// process (the call waits for the restart), under a new nonce so
		// the first try's leftovers are reaped apart.
		e.log.Warn("the sandbox plugin crashed during a deploy; deploying again on the restarted plugin", "env", name, "error", err)
		e.reapDeploy(nonce)
		nonce = newEpisodeID()
		spec.Labels[sandbox.LabelDeploy] = nonce
		sb, err = e.cfg.Sandbox.Deploy(ctx, spec)
	}
	rec(Span{Phase: PhaseDeploy, Env: name, Start: start, Took: time.Since(start)})
	if err != nil {
		e.uncount()
		e.reapDeploy(nonce)
		if timedOut(ctx, err) {
			return nil, withBrief(timeoutError{fmt.Errorf("deploying env %q: not ready within %s (the deploy timeout): %w", name, e.cfg.DeployTimeout, err)},
				"env %q was not ready within the deploy timeout (%s)", name, e.cfg.DeployTimeout)
		}
		why := "the sandbox could not start it"
		if errors.Is(err, sdk.ErrCrashed) {
			why = "the sandbox plugin crashed"
		}
		return nil, withBrief(fmt.Errorf("deploying env %q: %w", name, err), "env %q could not be deployed: %s", name, why)
	}
	le := &liveEnv{name: name, sb: sb, counted: true, rec: rec, def: env}
	ready := time.Now()
	defer func() { rec(Span{Phase: PhaseReady, Env: name, Start: ready, Took: time.Since(ready)}) }()
	fail := func(err error) (*liveEnv, error) {
		if terr := <-e.retire([]*liveEnv{le}).done; terr != nil {
			err = errors.Join(err, terr)
		}
		return nil, err
	}
	le.client, err = envclient.Connect(ctx, sb.Endpoint, envclient.Options{MaxResultBytes: e.cfg.Limits.MaxResultBytes})
	if err != nil {
		return fail(withBrief(fmt.Errorf("env %q deployed as %s but its MCP server does not answer: %w", name, sb.ID, err),
			"env %q was deployed but its MCP server did not answer", name))
	}
	tools, err := le.client.ListTools(ctx)
	if err != nil {
		return fail(withBrief(fmt.Errorf("env %q: %w", name, err), "env %q did not list its tools", name))
	}
	le.tools = make([]Tool, len(tools))
	for i, t := range tools {
		le.tools[i] = Tool(t)
	}
	if err := hideResetTool(le); err != nil {
		return fail(err)
	}
	e.log.Debug("env deployed", "env", name, "sandbox", sb.ID, "endpoint", sb.Endpoint, "tools", len(le.tools), "took", time.Since(start))
	return le, nil
}

// timedOut reports whether err came of ctx's deadline. The plugin call may
// fail from its own copy of the deadline a moment before ctx says so.
func timedOut(ctx context.Context, err error) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	deadline, ok := ctx.Deadline()
	return ok && !time.Now().Before(deadline)
}

// reapDeploy terminates, in the background, whatever a failed Deploy call
// left behind. A Deploy cut short by a plugin crash may have started an
// env the restarted plugin can list, so a failed List is retried like a
// failed Terminate.
func (e *Engine) reapDeploy(nonce string) {
	e.teardowns.add()
	go func() {
		defer e.teardowns.done()
		giveUp := time.Now().Add(e.cfg.TeardownRetry)
		wait := 100 * time.Millisecond
		for {
			rctx, cancel := context.WithTimeout(context.Background(), e.cfg.TeardownTimeout)
			left, err := e.cfg.Sandbox.List(rctx, map[string]string{sandbox.LabelDeploy: nonce})
			cancel()
			if err == nil {
				for _, sb := range left {
					e.log.Warn("terminating a sandbox a failed deploy left", "sandbox", sb.ID)
					if err := e.terminate(&liveEnv{name: sb.Labels[sandbox.LabelTask], sb: sb}); err != nil {
						e.log.Error("teardown failed; the env is left for reaping", "error", err)
					}
				}
				return
			}
			if time.Now().Add(wait).After(giveUp) {
				e.log.Error("could not list what a failed deploy left; it is left for reaping", "error", err)
				return
			}
			e.log.Warn("listing sandboxes after a failed deploy failed; retrying", "error", err, "retry_in", wait)
			if !e.pause(wait) {
				time.Sleep(min(wait, 100*time.Millisecond))
			}
			wait = min(wait*2, 5*time.Second)
		}
	}()
}

// pause waits d, or less once the engine is closing (false then).
func (e *Engine) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-e.closing:
		return false
	}
}

// uncount drops a sandbox from e.sandboxes, making room for the warm pool.
func (e *Engine) uncount() {
	e.sandboxes.Add(-1)
	if e.pool != nil {
		e.pool.poke()
	}
}

// teardown is the background teardown of some envs; done yields its error
// once every env is gone (or retrying gave up).
type teardown struct{ done chan error }

// retire tears envs down in the background: connections dropped (the
// env's end ends its session: no DELETE first), then each sandbox
// terminated through the handle Deploy returned. A Terminate that
// fails (the sandbox plugin crashed, or is restarting) is retried with
// backoff for up to TeardownRetry, so the restarted plugin completes it.
// The engine owns every teardown: Close waits for them.
func (e *Engine) retire(envs []*liveEnv) *teardown {
	td := &teardown{done: make(chan error, 1)}
	e.teardowns.add()
	go func() {
		defer e.teardowns.done()
		var errs []error
		for i := len(envs) - 1; i >= 0; i-- {
			le := envs[i]
			start := time.Now()
			if le.client != nil {
				le.client.Drop()
			}
			if err := e.terminate(le); err != nil {
				errs = append(errs, err)
			}
			rec := le.rec
			if rec == nil {
				rec = e.observe
			}
			rec(Span{Phase: PhaseTeardown, Env: le.name, Start: start, Took: time.Since(start)})
			if le.def != nil && le.def.Reuse > 1 && le.served > 0 {
				e.observeReuse(ReuseEvent{Kind: ReuseRetired, Env: le.name, Depth: le.served})
			}
			if le.counted {
				e.uncount()
			}
		}
		err := errors.Join(errs...)
		if err != nil {
			e.log.Error("teardown failed; the env is left for reaping", "error", err)
		}
		td.done <- err
	}()
	return td
}

// terminate terminates one env's sandbox, retrying failures.
func (e *Engine) terminate(le *liveEnv) error {
	giveUp := time.Now().Add(e.cfg.TeardownRetry)
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		tctx, cancel := context.WithTimeout(context.Background(), e.cfg.TeardownTimeout)
		err := e.cfg.Sandbox.Terminate(tctx, le.sb)
		cancel()
		if err == nil || errors.Is(err, sandbox.ErrNotFound) {
			if attempt > 1 {
				e.log.Info("teardown completed on a later attempt", "env", le.name, "sandbox", le.sb.ID, "attempts", attempt)
			}
			return nil
		}
		if time.Now().Add(wait).After(giveUp) {
			return fmt.Errorf("terminating env %q (sandbox %s), %d attempts: %w", le.name, le.sb.ID, attempt, err)
		}
		e.log.Warn("teardown failed; retrying", "env", le.name, "sandbox", le.sb.ID, "attempt", attempt, "error", err, "retry_in", wait)
		if !e.pause(wait) {
			// Shutting down: retry soon rather than on the usual schedule.
			time.Sleep(min(wait, 100*time.Millisecond))
		}
		wait = min(wait*2, 5*time.Second)
	}
}
