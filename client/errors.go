package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Code is a wire error code. A Code is also an error, so that
//
//	errors.Is(err, client.CodeCapacityReached)
//
// tells whether err is (or wraps) an *Error with that code.
type Code string

// The codes of docs/protocol.md.
const (
	CodeInvalidJSON     Code = "INVALID_JSON"      // a frame was not one JSON object
	CodeUnknownType     Code = "UNKNOWN_TYPE"      // a message type the server does not serve
	CodeValidation      Code = "VALIDATION_ERROR"  // a malformed request, or the episode refused a reply
	CodeMessageTooLarge Code = "MESSAGE_TOO_LARGE" // a frame over the server's limit (16 MiB)
	CodeNoEpisode       Code = "NO_EPISODE"        // a step with no live episode
	CodeNotFound        Code = "NOT_FOUND"         // no such task, split or toolset
	CodeCapacityReached Code = "CAPACITY_REACHED"  // no slot came free within the reset's wait
	CodeDeployFailed    Code = "DEPLOY_FAILED"     // the env could not be deployed or set up
	CodeExecutionError  Code = "EXECUTION_ERROR"   // the env or a plugin failed mid-episode
	CodeUnscored        Code = "UNSCORED"          // the episode ended with no score
	CodeShuttingDown    Code = "SHUTTING_DOWN"     // the server is stopping
	CodePreparing       Code = "PREPARING"         // the server still builds its envs (HTTP 503); wait it out
	CodeUnauthorized    Code = "UNAUTHORIZED"      // missing or wrong token (HTTP 401)
)

func (c Code) Error() string { return string(c) }

// Error is an error answer of the server: an error reply on the session,
// or an HTTP error (including a refused WebSocket upgrade).
type Error struct {
	// Code is the wire code; "" for an HTTP error with no agentenv body
	// (a proxy's 502, say).
	Code Code
	// Message says what was wrong, as the server wrote it.
	Message string
	// Status is the HTTP status of an HTTP answer; 0 for a session reply.
	Status int
	// Fields lists what was wrong in a VALIDATION_ERROR, as OpenEnv's
	// pydantic errors.
	Fields []FieldError
	// ActiveSessions, MaxSessions and Queued describe the server's load in
	// a CAPACITY_REACHED.
	ActiveSessions, MaxSessions, Queued int
}

// FieldError is one entry of a VALIDATION_ERROR's list: the kind of
// problem, where (["data", "max_turns"]), and a message.
type FieldError struct {
	Type string `json:"type"`
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
}

func (e *Error) Error() string {
	switch {
	case e.Code == "":
		return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message)
	case e.Message == "":
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Message
}

// Is reports whether target is e's Code.
func (e *Error) Is(target error) bool {
	c, ok := target.(Code)
	return ok && c != "" && c == e.Code
}

var (
	// ErrClosed is returned by calls on a Session after Close.
	ErrClosed = errors.New("session closed")
	// ErrDisconnected is wrapped by errors of a connection that ended
	// without an answer; the error says why.
	ErrDisconnected = errors.New("connection to the server ended")
)

// wireError is an error reply's data.
type wireError struct {
	Code           Code         `json:"code"`
	Message        string       `json:"message"`
	Errors         []FieldError `json:"errors"`
	ActiveSessions int          `json:"active_sessions"`
	MaxSessions    int          `json:"max_sessions"`
	Queued         int          `json:"queued"`
}

func (w wireError) toError() *Error {
	return &Error{Code: w.Code, Message: w.Message, Fields: w.Errors,
		ActiveSessions: w.ActiveSessions, MaxSessions: w.MaxSessions, Queued: w.Queued}
}

// httpError reads a non-2xx response: the server's {"detail", "code"}, or
// the start of whatever a proxy sent.
func httpError(resp *http.Response) *Error {
	e := &Error{Status: resp.StatusCode}
	var body []byte
	if resp.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	}
	var b struct {
		Detail  any    `json:"detail"`
		Code    Code   `json:"code"`
		Status  string `json:"status"`
		Message string `json:"message"` // a preparing /health says what it builds
	}
	if json.Unmarshal(body, &b) == nil {
		e.Code = b.Code
		switch d := b.Detail.(type) {
		case string:
			e.Message = d
		case nil:
		default: // FastAPI's list of field errors
			raw, _ := json.Marshal(d)
			e.Message = string(raw)
		}
		if e.Message == "" && b.Message != "" {
			e.Message = b.Message
		}
		if e.Message == "" && b.Status != "" {
			e.Message = "status " + b.Status
		}
	}
	if e.Message == "" {
		text := strings.TrimSpace(string(body))
		if len(text) > 200 {
			text = text[:200] + "…"
		}
		e.Message = strings.TrimSpace(http.StatusText(resp.StatusCode) + " " + text)
	}
	if e.Code == "" {
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			e.Code = CodeUnauthorized
		case http.StatusServiceUnavailable:
			switch b.Status {
			case "draining":
				e.Code = CodeShuttingDown
			case "preparing":
				e.Code = CodePreparing
			}
		}
	}
	return e
}
