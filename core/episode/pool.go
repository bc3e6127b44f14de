package episode

import (
	"context"
	"sync"
	"time"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

// WarmEpisode is the value of the episode and task labels of a sandbox the
// warm pool deployed: labels are fixed when a sandbox is deployed, before
// any episode takes it. The engine logs which episode takes which sandbox.
const WarmEpisode = "warm"

// Bounds of the pause after a warm deploy failed, before the next try.
const (
	warmRetryMin = time.Second
	warmRetryMax = 30 * time.Second
	pingTimeout  = 2 * time.Second
	// resetWait bounds how long an episode waits for a reset in flight
	// (a reset is one tool call, milliseconds) before it deploys its own.
	resetWait = 2 * time.Second
)

// warmPool keeps Config.Warm sandboxes of each env of the bundle deployed,
// ready (deployed, MCP answered, tools listed) and unused. A reset takes
// one and the pool deploys another behind it; a sandbox is never used by
// two episodes, unless its env asked for reuse: then the envs reset after
// an episode (reuse.go) come back here, count towards Config.Warm, and an
// episode that finds none ready waits for a reset in flight rather than
// deploying. The pool deploys only while the engine's live sandboxes
// number fewer than Config.WarmLimit, so warm sandboxes count against the
// server's capacity; one finished when that is no longer so is torn down.
type warmPool struct {
	e    *Engine
	size int
	envs []string

	ctx    context.Context // cancelled by close: the filler stops, deploys give up
	cancel context.CancelFunc
	wake   chan struct{}
	done   chan struct{} // closed when the filler has stopped
	fills  sync.WaitGroup

	mu      sync.Mutex
	ready   map[string][]*liveEnv // by env, oldest first
	filling map[string]int        // deploys in flight, by env
	retryAt map[string]time.Time  // after a failure, by env
	backoff map[string]time.Duration
	full    map[string]bool // reported full once, by env
	// resetting counts the resets in flight, by env; waiters are the
	// episodes waiting for one (never more than resetting), oldest first.
	resetting map[string]int
	waiters   map[string][]chan *liveEnv
	closed    bool
}

func newWarmPool(e *Engine) *warmPool {
	ctx, cancel := context.WithCancel(context.Background())
	p := &warmPool{
		e: e, size: e.cfg.Warm, envs: sortedEnvNames(e.cfg.Bundle),
		ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), done: make(chan struct{}),
		ready: map[string][]*liveEnv{}, filling: map[string]int{}, retryAt: map[string]time.Time{},
		backoff: map[string]time.Duration{}, full: map[string]bool{},
		resetting: map[string]int{}, waiters: map[string][]chan *liveEnv{},
	}
	return p
}

// poke makes the filler look again (a sandbox was taken, or one of the
// engine's sandboxes went, freeing room).
func (p *warmPool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run starts deploys until every env has its share, whenever room allows.
func (p *warmPool) run() {
	defer close(p.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := p.startFills()
		timer.Reset(next)
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		case <-timer.C:
		}
	}
}

// startFills starts the deploys the pool lacks and room allows; it returns
// how long until a failed env may be tried again (or an hour).
func (p *warmPool) startFills() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := time.Hour
	now := time.Now()
	for _, env := range p.envs {
		for !p.closed && len(p.ready[env])+p.filling[env]+p.resetting[env] < p.size {
			if at := p.retryAt[env]; now.Before(at) {
				next = min(next, at.Sub(now))
				break
			}
			if !p.e.room() {
				return next // poked again when a sandbox goes
			}
			p.filling[env]++
			p.e.sandboxes.Add(1) // counted now, so the next check sees it
			p.fills.Add(1)
			go p.fill(env)
		}
	}
	return next
}

// fill deploys one warm sandbox of env (its slot already counted).
func (p *warmPool) fill(env string) {
	defer p.fills.Done()
	labels := map[string]string{sandbox.LabelEpisode: WarmEpisode, sandbox.LabelTask: WarmEpisode}
	le, err := p.e.deployCounted(p.ctx, env, labels, nil)
	p.mu.Lock()
	p.filling[env]--
	if err != nil {
		b := p.backoff[env]
		// The first failure of this round: a retry that fails at the very
		// instant it was due (a coarse clock) starts a round too, or the
		// filler would retry at once, again and again.
		if !time.Now().Before(p.retryAt[env]) {
			b = min(max(b*2, warmRetryMin), warmRetryMax)
			p.backoff[env], p.retryAt[env] = b, time.Now().Add(b)
		}
		p.mu.Unlock()
		if p.ctx.Err() == nil {
			p.e.log.Warn("deploying a warm sandbox failed; trying again later", "env", env, "retry_in", b, "error", err)
		}
		p.poke()
		return
	}
	delete(p.backoff, env)
	delete(p.retryAt, env)
	if p.closed || p.e.over() {
		p.mu.Unlock()
		p.e.retire([]*liveEnv{le}) // shutting down, or episodes took its room meanwhile
		return
	}
	p.ready[env] = append(p.ready[env], le)
	filled := len(p.ready[env]) == p.size && !p.full[env]
	p.full[env] = p.full[env] || filled
	p.mu.Unlock()
	if filled {
		p.e.log.Info("warm pool full", "env", env, "sandboxes", p.size)
	}
	p.poke()
}

// take hands the oldest ready sandbox of env to an episode, checking that
// it still answers (unless a reset just proved it), or, when none is ready
// and a reset of env is in flight that no other episode waits for, waits
// for that one; nil when there is none (the episode deploys its own).
func (p *warmPool) take(ctx context.Context, env string) *liveEnv {
	for {
		p.mu.Lock()
		list := p.ready[env]
		if p.closed {
			p.mu.Unlock()
			return nil
		}
		if len(list) == 0 {
			if p.resetting[env] <= len(p.waiters[env]) {
				p.mu.Unlock()
				return nil
			}
			ch := make(chan *liveEnv, 1)
			p.waiters[env] = append(p.waiters[env], ch)
			p.mu.Unlock()
			return p.await(ctx, env, ch)
		}
		le := list[0]
		list[0] = nil
		p.ready[env] = list[1:]
		p.mu.Unlock()
		p.poke()
		if !le.resetAt.IsZero() && time.Since(le.resetAt) < reuseFresh {
			return le
		}
		pctx, cancel := context.WithTimeout(ctx, pingTimeout)
		err := le.client.Ping(pctx)
		cancel()
		if err == nil {
			return le
		}
		p.e.log.Warn("a warm sandbox stopped answering; tearing it down", "env", env, "sandbox", le.sb.ID, "error", err)
		p.e.retire([]*liveEnv{le})
		if ctx.Err() != nil {
			return nil
		}
	}
}

// await waits for the env a reset hands to ch (nil: the reset failed, or
// the pool closed), up to resetWait; an episode that gives up first leaves
// it to the pool.
func (p *warmPool) await(ctx context.Context, env string, ch chan *liveEnv) *liveEnv {
	t := time.NewTimer(resetWait)
	defer t.Stop()
	select {
	case le := <-ch:
		return le
	case <-ctx.Done():
	case <-t.C:
	}
	p.mu.Lock()
	for i, w := range p.waiters[env] {
		if w == ch {
			p.waiters[env] = append(p.waiters[env][:i:i], p.waiters[env][i+1:]...)
			p.mu.Unlock()
			return nil
		}
	}
	p.mu.Unlock()
	// Already handed over: the env goes back for the next episode.
	if le := <-ch; le != nil {
		p.put(env, le)
	}
	return nil
}

// resetStarted counts a reset of env in flight.
func (p *warmPool) resetStarted(env string) {
	p.mu.Lock()
	p.resetting[env]++
	p.mu.Unlock()
}

// resetDone ends a reset of env: le is the env reset, nil when the reset
// failed (a waiter counting on it then deploys its own).
func (p *warmPool) resetDone(env string, le *liveEnv) {
	p.mu.Lock()
	p.resetting[env]--
	if le == nil {
		var w chan *liveEnv
		if ws := p.waiters[env]; len(ws) > p.resetting[env] {
			w, p.waiters[env] = ws[0], ws[1:]
		}
		p.mu.Unlock()
		if w != nil {
			w <- nil
		}
		p.poke()
		return
	}
	p.mu.Unlock()
	p.put(env, le)
}

// put hands a reset env to the episode waiting longest for one, or keeps
// it ready; past the engine's cap, or once the pool is closing, it is
// torn down.
func (p *warmPool) put(env string, le *liveEnv) {
	p.mu.Lock()
	if ws := p.waiters[env]; len(ws) > 0 && !p.closed {
		w := ws[0]
		p.waiters[env] = ws[1:]
		p.mu.Unlock()
		w <- le
		return
	}
	if p.closed || p.e.over() {
		p.mu.Unlock()
		p.e.retire([]*liveEnv{le})
		return
	}
	p.ready[env] = append(p.ready[env], le)
	p.mu.Unlock()
	p.poke()
}

// stats is how many sandboxes of env are ready and being deployed.
func (p *warmPool) stats(env string) (ready, deploying int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready[env]), p.filling[env]
}

// close stops refilling, lets deploys in flight finish (cutting them
// short only when ctx ends: a cut-short deploy may leave objects for
// reaping) and tears every ready sandbox down (in the background, as the
// engine's teardowns).
func (p *warmPool) close(ctx context.Context) {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.poke()
	filled := make(chan struct{})
	go func() { p.fills.Wait(); close(filled) }()
	select {
	case <-filled:
	case <-ctx.Done():
	}
	p.cancel()
	<-p.done
	<-filled
	p.mu.Lock()
	var envs []*liveEnv
	for env, list := range p.ready {
		envs = append(envs, list...)
		delete(p.ready, env)
	}
	var waiting []chan *liveEnv
	for env, ws := range p.waiters {
		waiting = append(waiting, ws...)
		delete(p.waiters, env)
	}
	p.mu.Unlock()
	for _, w := range waiting {
		w <- nil // they deploy their own, which the engine's Close then ends
	}
	if len(envs) > 0 {
		p.e.retire(envs)
	}
}
