package episode

import (
	"errors"
	"fmt"
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

// withBrief wraps err with what a remote client may be told.
func withBrief(err error, format string, args ...any) error {
	return &briefError{brief: fmt.Sprintf(format, args...), err: err}
}

// Brief is what a remote client is told of a DEPLOY_FAILED failure: the
// env and a short cause, no server path, command line or env output (the
// full detail, Error(), belongs in the server's log). ok is false for
// other codes, whose messages are the client's own business (its request,
// its model's reply) and are sent as they are.
func (e *Error) Brief() (msg string, ok bool) {
	if e.Code != CodeDeploy {
		return "", false
	}
	var b *briefError
	if errors.As(e.Err, &b) {
		return b.brief, true
	}
	return "the episode's envs could not be set up", true
}
