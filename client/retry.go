package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"syscall"
	"time"
)

// Backoff between tries: from backoffMin, doubling, capped at backoffMax,
// each wait drawn from [d/2, d) so that many clients waiting out the same
// restart do not come back in step.
const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 2 * time.Second
)

// retry runs try until it succeeds, fails for good, or ctx ends. Without a
// deadline on ctx it tries once: waiting is the caller's choice, made by
// setting one.
func (c *Client) retry(ctx context.Context, try func(context.Context) error) error {
	_, patient := ctx.Deadline()
	start := time.Now()
	var last error
	for n := 1; ; n++ {
		err := try(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil && last != nil {
			return gaveUp(n, start, ctx.Err(), last)
		}
		if !patient || ctx.Err() != nil || !notReady(err) {
			return err
		}
		last = err
		wait := backoff(n)
		if c.opts.OnRetry != nil {
			c.opts.OnRetry(err, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return gaveUp(n, start, ctx.Err(), last)
		case <-t.C:
		}
	}
}

func gaveUp(tries int, start time.Time, ctxErr, last error) error {
	return fmt.Errorf("gave up waiting for the server after %d tries in %s (%w); last error: %w",
		tries, time.Since(start).Round(time.Millisecond), ctxErr, last)
}

// backoff is the wait after the n-th failed try.
func backoff(n int) time.Duration {
	d := backoffMax
	if n < 16 {
		d = min(backoffMin<<(n-1), backoffMax)
	}
	return d/2 + rand.N(d/2)
}

// notReady reports whether err says the server is not ready yet rather
// than that the call is wrong: it is restarting (refused, reset), draining
// or behind a proxy that cannot reach it (a 502, 503 or 504 with no
// agentenv code; SHUTTING_DOWN),
// still building its envs (PREPARING), full (CAPACITY_REACHED), or the
// connection dropped before an answer.
func notReady(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		switch e.Code {
		case CodeCapacityReached, CodeShuttingDown, CodePreparing:
			return true
		case "":
		default:
			// The server itself answered with a code (DEPLOY_FAILED is a
			// 502): waiting would not change its answer. Only a bare 5xx,
			// a proxy's, means the server is not there yet.
			return false
		}
		switch e.Status {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrDisconnected)
}
