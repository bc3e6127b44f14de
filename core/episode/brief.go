package episode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/agentenv/agentenv/core/envclient"
	"github.com/agentenv/agentenv/core/threadlimit"
	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// briefError is a failure whose detail (server paths, an env's command
// line, its last output, which may print its secrets) is for the server's
// log; brief is what a remote client may be told of it.
type briefError struct {
	brief string
	err   error
}

func (b *briefError) Error() string { return b.err.Error() }
func (b *briefError) Unwrap() error { return b.err }

// withBrief wraps err with what a remote client may be told. An
// infrastructure failure while the machine is out of threads (live envs'
// threads count against kernel.pid_max) says so in both: that is why
// forks and thread starts failed, and envs died (core/threadlimit).
func withBrief(err error, format string, args ...any) error {
	brief := fmt.Sprintf(format, args...)
	var inner *briefError
	if !errors.As(err, &inner) { // an outer brief repeats the inner's
		if l, ok := exhaustedThreads(); ok {
			err = fmt.Errorf("%w; %s", err, l.Note())
			brief += "; " + l.Note()
		}
	}
	return &briefError{brief: brief, err: err}
}

// exhaustedThreads is threadlimit.Exhausted, replaced by tests.
var exhaustedThreads = threadlimit.Exhausted

// Brief is what a remote client is told of a failure whose detail is the
// server's: a DEPLOY_FAILED one, or an env that stopped answering a call
// mid-episode. It names the env and a short cause, no server path, env
// address, command line or env output (the full detail, Error(), belongs
// in the server's log). ok is false for the other failures, whose messages
// are the client's own business (its request, its model's reply) and are
// sent as they are.
func (e *Error) Brief() (msg string, ok bool) {
	var b *briefError
	if errors.As(e.Err, &b) {
		return b.brief, true
	}
	if e.Code != CodeDeploy {
		return "", false
	}
	return "the episode's envs could not be set up", true
}

// callFailure wraps the error of a call to an env (what) that did not
// answer: its text names the env's address, so the client is told only
// the env, its sandbox (a pod, a container: to look it up), what went
// wrong and what the sandbox says became of it (why, when it says).
func callFailure(err error, env, sandboxID, what, why string) error {
	brief := fmt.Sprintf("env %q (sandbox %s): %s got no answer: %s", env, sandboxID, what, transportCause(err))
	if why != "" {
		err = fmt.Errorf("%w; the sandbox says: %s", err, why)
		brief += "; the sandbox says: " + why
	}
	return withBrief(err, "%s", brief)
}

// explainTimeout bounds the question to the sandbox after a failed call.
const explainTimeout = 5 * time.Second

// explain asks the sandbox what became of le's sandbox after a call to
// it failed (sandbox.Explainer): "" when it cannot say, or when the call
// failed for a reason of ours (cancelled, the sandbox plugin crashed).
func (e *Engine) explain(ctx context.Context, le *liveEnv, err error) string {
	ex, ok := e.cfg.Sandbox.(sandbox.Explainer)
	if !ok || errors.Is(err, sdk.ErrCrashed) || errors.Is(err, context.Canceled) {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), explainTimeout)
	defer cancel()
	why, xerr := ex.Explain(ctx, le.sb)
	if xerr != nil {
		e.log.Debug("the sandbox could not say what became of a sandbox whose env stopped answering", "sandbox", le.sb.ID, "error", xerr)
		return ""
	}
	return why
}

// transportCause says in a few words why a call to an env got no answer.
func transportCause(err error) string {
	switch {
	case errors.Is(err, sdk.ErrCrashed):
		return "the sandbox plugin died"
	case errors.Is(err, envclient.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return "it did not answer in time"
	case errors.Is(err, context.Canceled):
		return "the call was cancelled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the env refused the connection (it has stopped)"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the env closed the connection (it crashed or was stopped)"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		// A pod or task whose network went with it (evicted, its node gone).
		return "the env's address is unreachable (its sandbox is gone or cut off)"
	}
	return "the call failed"
}
