package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// preparer runs a plugin's Prepare at most once per env in this process,
// whatever the number of concurrent callers. A Prepare that failed is not
// run again (it would fail again); one cut short by its context is.
type preparer struct {
	impl Preparer // nil: the plugin prepares nothing

	mu   sync.Mutex
	envs map[string]*prepared
}

type prepared struct {
	turn chan struct{} // held while preparing; a channel so waiters can give up
	done bool
	err  error
}

// key tells envs apart: two bundles may have envs of the same name.
func prepareKey(spec Spec) string {
	return strings.Join([]string{spec.Env, spec.Dir, spec.Image, strings.Join(spec.Build, "\x00")}, "\x01")
}

func (p *preparer) prepare(ctx context.Context, spec Spec) error {
	if p.impl == nil {
		return nil
	}
	key := prepareKey(spec)
	p.mu.Lock()
	e := p.envs[key]
	if e == nil {
		e = &prepared{turn: make(chan struct{}, 1)}
		p.envs[key] = e
	}
	p.mu.Unlock()
	select {
	case e.turn <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("waiting for env %q to be prepared: %w", spec.Env, ctx.Err())
	}
	defer func() { <-e.turn }()
	if e.done {
		return e.err
	}
	err := p.impl.Prepare(ctx, spec)
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) && ctx.Err() != nil {
		return err // cut short: the next caller tries again
	}
	e.done, e.err = true, err
	return err
}
