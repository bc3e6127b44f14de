package hostenv

import (
	"context"
	"fmt"
	"net"
	"strconv"
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
	began := time.Now()
	wait := 200 * time.Microsecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		select {
		case <-done:
			return fmt.Errorf("exited before listening on port %d: %v", port, exitText(exitErr()))
		default:
		}
		err := probe(ctx)
		if err == nil {
			return nil
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return fmt.Errorf("not listening on port %d: %w (last error: %v)", port, ctx.Err(), err)
		case <-done:
		case <-timer.C:
		}
		if time.Since(began) < slowStart {
			wait = min(wait*2, 5*time.Millisecond)
		} else {
			wait = min(wait*2, 20*time.Millisecond)
		}
	}
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
