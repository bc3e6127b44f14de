package server

import (
	"context"
	"errors"
	"sync"
	"time"
)

var (
	errCapacity     = errors.New("capacity reached")
	errShuttingDown = errors.New("server is shutting down")
)

// admission caps live episodes. A reset that finds every slot taken waits
// in a FIFO queue; a freed slot goes straight to the oldest waiter, so a
// new arrival cannot overtake the queue.
type admission struct {
	mu     sync.Mutex
	limit  int
	active int
	queue  []*waiter
	closed bool
	// onChange reports active and queued counts after each change (metrics).
	onChange func(active, queued int)
}

type waiter struct {
	ready   chan struct{}
	granted bool // a slot was handed to this waiter
}

func newAdmission(limit int, onChange func(active, queued int)) *admission {
	if onChange == nil {
		onChange = func(int, int) {}
	}
	return &admission{limit: limit, onChange: onChange}
}

// acquire takes a slot, waiting up to wait. It returns errCapacity when
// the wait ends first, errShuttingDown after close, or ctx's error.
func (a *admission) acquire(ctx context.Context, wait time.Duration) error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return errShuttingDown
	}
	if a.active < a.limit && len(a.queue) == 0 {
		a.active++
		a.changed()
		a.mu.Unlock()
		return nil
	}
	w := &waiter{ready: make(chan struct{})}
	a.queue = append(a.queue, w)
	a.changed()
	a.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	var cause error
	select {
	case <-w.ready:
	case <-timer.C:
		cause = errCapacity
	case <-ctx.Done():
		cause = ctx.Err()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if w.granted {
		// The slot arrived as we gave up: keep it rather than lose it.
		return nil
	}
	a.remove(w)
	if a.closed {
		return errShuttingDown
	}
	return cause
}

// release frees a slot, handing it to the oldest waiter if there is one.
func (a *admission) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.queue) > 0 && !a.closed {
		w := a.queue[0]
		a.queue = a.queue[1:]
		w.granted = true
		close(w.ready)
	} else if a.active > 0 {
		a.active--
	}
	a.changed()
}

// close refuses further acquires and wakes every waiter.
func (a *admission) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	a.closed = true
	for _, w := range a.queue {
		close(w.ready)
	}
	a.queue = nil
	a.changed()
}

func (a *admission) remove(w *waiter) {
	for i, q := range a.queue {
		if q == w {
			a.queue = append(a.queue[:i], a.queue[i+1:]...)
			a.changed()
			return
		}
	}
}

// changed must be called with mu held.
func (a *admission) changed() { a.onChange(a.active, len(a.queue)) }

// counts returns active and queued, for the capacity error.
func (a *admission) counts() (active, queued int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.active, len(a.queue)
}
