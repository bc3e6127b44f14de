package envclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// drainGrace is how long a request whose caller has gone (a call timed
// out, or returned with its answer) may go on reading its body to the end
// before it is cancelled.
const drainGrace = 250 * time.Millisecond

// drainWait is how long a request waits for the streams of calls already
// answered to reach their end, so it takes their connection rather than
// dial another: a healthy stream's tail comes at once, but on a busy
// machine its reader may not have run yet when the next call starts.
const drainWait = 20 * time.Millisecond

// keepConnTransport keeps an env's connections alive across calls. The MCP
// SDK returns a call as soon as its answer is read from the stream, before
// the stream's end is; the call's context is then cancelled (its deadline
// ends with it), and a request cancelled before its body is read to the end
// closes its connection: a third of calls dialed a new one. Here a request
// is cancelled at once only while it waits for the response; once the
// response has come, a cancelled caller leaves it drainGrace to finish, so
// an env that hangs mid-stream still loses its connection, and a healthy
// one keeps it. A new request first waits (up to drainWait) for those
// drains to end, so that it finds their connection back in the pool.
type keepConnTransport struct {
	base http.RoundTripper

	mu       sync.Mutex
	draining int           // answered requests whose caller has gone, not yet at their end
	drained  chan struct{} // closed when draining falls to 0
}

// waitDrains waits, up to drainWait, for the draining requests to end.
func (t *keepConnTransport) waitDrains() {
	t.mu.Lock()
	ch := t.drained
	busy := t.draining > 0
	t.mu.Unlock()
	if !busy {
		return
	}
	timer := time.NewTimer(drainWait)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
	}
}

func (t *keepConnTransport) drainBegun() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.draining == 0 {
		t.drained = make(chan struct{})
	}
	t.draining++
}

func (t *keepConnTransport) drainEnded() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.draining--; t.draining == 0 {
		close(t.drained)
	}
}

func (t *keepConnTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.waitDrains()
	parent := req.Context()
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	var (
		mu       sync.Mutex
		answered bool
		finished bool // the body was read to its end or closed
		draining bool // counted in t.draining
		timer    *time.Timer
	)
	stop := context.AfterFunc(parent, func() {
		mu.Lock()
		defer mu.Unlock()
		if !answered {
			cancel()
			return
		}
		if finished {
			return
		}
		draining = true
		t.drainBegun()
		timer = time.AfterFunc(drainGrace, cancel)
	})
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil || resp.Body == nil {
		stop()
		cancel()
		if err != nil && parent.Err() != nil && errors.Is(err, context.Canceled) {
			// Say why as the caller's context does (a deadline, not a cancel).
			err = parent.Err()
		}
		return resp, err
	}
	mu.Lock()
	answered = true
	mu.Unlock()
	resp.Body = &drainBody{ReadCloser: resp.Body, done: func() {
		stop()
		mu.Lock()
		finished = true
		if timer != nil {
			timer.Stop()
		}
		if draining {
			t.drainEnded()
		}
		mu.Unlock()
		cancel()
	}}
	return resp, nil
}

// drainBody ends its request once read to the end or closed.
type drainBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *drainBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		// At EOF the connection is back in the pool already.
		b.once.Do(b.done)
	}
	return n, err
}

func (b *drainBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}
