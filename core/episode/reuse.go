package episode

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Env reuse, by the env's own choice (env.toml `reuse = N`): after an
// episode that ended with a reward, an env that may serve more episodes
// is reset through the tool it names (reset_tool) and handed to the warm
// pool for the next episode of the same env; a reset that fails, times
// out or answers with an error tears it down instead. An env that did not
// ask is never reused, and one engine serves one bundle, so nothing
// crosses bundles or servers; the pool keys envs by name and checks the
// env definition they were deployed from.

// ReuseKind says what happened to a reusable env.
type ReuseKind string

const (
	ReuseReset       ReuseKind = "reset"        // a reset passed: the env went back to the pool
	ReuseResetFailed ReuseKind = "reset_failed" // a reset failed: the env was torn down
	ReuseTaken       ReuseKind = "reused"       // an episode got an env an earlier episode had
	ReuseRetired     ReuseKind = "retired"      // a reusable env was torn down; Depth: episodes it served
)

// ReuseEvent is one event of a reusable env's life.
type ReuseEvent struct {
	Kind    ReuseKind
	Env     string
	Sandbox string        // the sandbox plugin (Config.SandboxName)
	Depth   int           // episodes the deploy has served so far
	Took    time.Duration // the reset call's time (reset, reset_failed)
}

// ReuseObserver hears of reusable envs when Config.Observer implements it
// too (the server's metrics do). Calls must not block.
type ReuseObserver interface {
	ObserveReuse(ev ReuseEvent)
}

// ObserveReuse hands ev to each observer that hears of reuse.
func (o Observers) ObserveReuse(ev ReuseEvent) {
	for _, x := range o {
		if r, ok := x.(ReuseObserver); ok {
			r.ObserveReuse(ev)
		}
	}
}

// reuseFresh is how recently reset an env may be for an episode to take
// it without the ping the pool's other sandboxes get: the reset was a
// call the env answered.
const reuseFresh = time.Second

func (e *Engine) observeReuse(ev ReuseEvent) {
	if r, ok := e.cfg.Observer.(ReuseObserver); ok {
		ev.Sandbox = e.cfg.SandboxName
		r.ObserveReuse(ev)
	}
}

// reusable says whether le may serve another episode after this one.
func (e *Engine) reusable(le *liveEnv) bool {
	return e.pool != nil && le.def != nil && le.def.Reuse > le.served && le.client != nil &&
		e.cfg.Bundle.Envs[le.name] == le.def
}

// anyReuse says whether some env of the bundle asks to be reused.
func (e *Engine) anyReuse() bool {
	for _, env := range e.cfg.Bundle.Envs {
		if env.Reuse > 1 {
			return true
		}
	}
	return false
}

// recycle resets le in the background, off the episode's path, and hands
// it to the pool; a failed reset tears it down. The engine counts it as a
// teardown, so Close and Idle wait for it.
func (e *Engine) recycle(le *liveEnv) {
	e.teardowns.add()
	e.pool.resetStarted(le.name)
	le.rec = nil // between episodes its spans are the engine's
	go func() {
		defer e.teardowns.done()
		start := time.Now()
		err := e.reset(le)
		took := time.Since(start)
		if err != nil {
			e.observeReuse(ReuseEvent{Kind: ReuseResetFailed, Env: le.name, Depth: le.served, Took: took})
			e.log.Warn("resetting an env failed; tearing it down (the next episode gets a fresh one)",
				"env", le.name, "sandbox", le.sb.ID, "episodes_served", le.served, "error", err)
			e.pool.resetDone(le.name, nil)
			e.retire([]*liveEnv{le})
			return
		}
		e.observeReuse(ReuseEvent{Kind: ReuseReset, Env: le.name, Depth: le.served, Took: took})
		le.resetAt = time.Now()
		e.pool.resetDone(le.name, le)
	}()
}

// reset calls the env's reset tool within the tool call timeout.
func (e *Engine) reset(le *liveEnv) error {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.ToolCallTimeout)
	defer cancel()
	res, err := le.client.CallTool(ctx, le.def.ResetTool, json.RawMessage(`{}`), e.cfg.ToolCallTimeout)
	if err != nil {
		return fmt.Errorf("reset tool %s: %w", le.def.ResetTool, err)
	}
	if res.IsError {
		return fmt.Errorf("reset tool %s answered with an error: %s", le.def.ResetTool, clip(res.Text, 200))
	}
	return nil
}

// hideResetTool drops the env's reset tool from what it lists (the model
// is never offered it); an env that asked for reuse and does not serve
// the tool it named is an error saying so.
func hideResetTool(le *liveEnv) error {
	if le.def == nil || le.def.Reuse < 2 {
		return nil
	}
	for i, t := range le.tools {
		if t.Name == le.def.ResetTool {
			le.tools = append(le.tools[:i:i], le.tools[i+1:]...)
			return nil
		}
	}
	err := fmt.Errorf("env %q declares reuse = %d in its env.toml but does not serve its reset tool %q (reset_tool): serve it, or drop reuse",
		le.name, le.def.Reuse, le.def.ResetTool)
	return withBrief(err, "%s", err.Error())
}
