package hostenv

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// WaitReady returns once probe succeeds, fails as soon as the env's
// process exits (done closed; exitErr is then its exit, nil for a clean
// one), or when ctx ends. A closed loopback port refuses in microseconds,
// so it polls tightly at first: an env is seen ready within a millisecond
// of binding. An env still not listening after slowStart (a loaded
// machine) is polled every 20 ms rather than 5: the probes of slow starts
// were a seventh of the process sandbox's CPU per deploy. port only names
// the port in errors.
func WaitReady(ctx context.Context, port int, done <-chan struct{}, exitErr func() error, probe func(context.Context) error) error {
	return WaitReadyExpecting(ctx, port, 0, done, exitErr, probe)
}

// WaitReadyExpecting is WaitReady for an env expected to listen about
// expect after it started (ListenTimes learns it): the first probe comes
// at three fifths of expect and the next ones every eighth of it (at
// least 200 µs, at most 20 ms), so a deploy probes four or five times
// rather than ten to fifteen, and sees the env ready at most an eighth of
// expect late. An exit is still seen at once. expect 0 is WaitReady.
func WaitReadyExpecting(ctx context.Context, port int, expect time.Duration, done <-chan struct{}, exitErr func() error, probe func(context.Context) error) error {
	began := time.Now()
	first, step := time.Duration(0), 200*time.Microsecond
	if expect > 0 {
		first = expect * 3 / 5
		step = min(max(expect/8, 200*time.Microsecond), 20*time.Millisecond)
	}
	timer := time.NewTimer(first)
	defer timer.Stop()
	exited := func() error {
		return fmt.Errorf("exited before listening on port %d: %v", port, exitText(exitErr()))
	}
	var last error
	for {
		select {
		case <-ctx.Done():
			if last == nil {
				return fmt.Errorf("not listening on port %d: %w", port, ctx.Err())
			}
			return fmt.Errorf("not listening on port %d: %w (last error: %v)", port, ctx.Err(), last)
		case <-done:
			return exited()
		case <-timer.C:
		}
		select { // an exit that came with the timer wins
		case <-done:
			return exited()
		default:
		}
		if last = probe(ctx); last == nil {
			return nil
		}
		timer.Reset(step)
		took := time.Since(began)
		if expect > 0 && took < 2*expect {
			continue // as expected: keep the step
		}
		limit := 5 * time.Millisecond
		if took >= slowStart {
			limit = 20 * time.Millisecond
		}
		step = min(step*2, max(limit, step))
	}
}

// ListenTimes learns how long each command takes to listen after it is
// started: a moving average per key (the command), for
// WaitReadyExpecting. Safe for concurrent use; the zero value is ready.
type ListenTimes struct {
	mu  sync.Mutex
	avg map[string]time.Duration
}

// maxListenKeys bounds what ListenTimes keeps: a plugin serving more
// commands than that starts learning again.
const maxListenKeys = 1024

// Expect is key's average time to listen, 0 before any was observed.
func (l *ListenTimes) Expect(key string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.avg[key]
}

// Observe records that key took took to listen: the average moves an
// eighth of the way to it, so one slow start (a loaded moment) does not
// delay the next deploys' first probe much.
func (l *ListenTimes) Observe(key string, took time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	prev, ok := l.avg[key]
	if ok {
		took = prev + (took-prev)/8
	} else if l.avg == nil || len(l.avg) >= maxListenKeys {
		l.avg = map[string]time.Duration{}
	}
	l.avg[key] = max(took, time.Microsecond)
}

// DialProbe is a WaitReady probe that connects to port on loopback (for at
// most a second, or until ctx ends) and hangs up.
func DialProbe(port int) func(context.Context) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	var d net.Dialer
	return func(ctx context.Context) error {
		if done, err := connectOnce(port); done {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err
	}
}

// slowStart is how long WaitReady polls an env at most every 5 ms.
const slowStart = 100 * time.Millisecond

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
