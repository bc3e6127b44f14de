package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

const (
	// writeWait bounds one frame's write; a call's context can end it sooner.
	writeWait = 30 * time.Second
	// closeWait is how long Close waits for the server to close the
	// connection after a close message (it tears the episode down first).
	closeWait = 5 * time.Second
)

// Session is one WebSocket session with the server, playing one episode at
// a time. Use it from one goroutine at a time; Close, Done and Err may be
// called from any.
type Session struct {
	c      *Client
	mu     sync.Mutex // guards conn and closed
	conn   *conn
	closed bool
}

// Connect opens a Session. With a deadline on ctx it waits out a server
// that is restarting or draining.
func (c *Client) Connect(ctx context.Context) (*Session, error) {
	var k *conn
	err := c.retry(ctx, func(ctx context.Context) error {
		var err error
		k, err = c.dial(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", c.ws, err)
	}
	return &Session{c: c, conn: k}, nil
}

// dial opens one connection, once.
func (c *Client) dial(ctx context.Context) (*conn, error) {
	h := http.Header{}
	c.authorize(h)
	ws, resp, err := c.dialer.DialContext(ctx, c.ws, h)
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, httpError(resp)
		}
		return nil, err
	}
	return newConn(ws, c.opts), nil
}

// Reset starts an episode of the task req names and returns its opening
// observation: the prompt and the tools. An episode in play on this
// session is torn down first. With a deadline on ctx, Reset waits out a
// server at capacity or restarting until shortly before it (see the
// package doc), connecting again when the server closed the connection.
func (s *Session) Reset(ctx context.Context, req ResetRequest) (Result, error) {
	var res Result
	err := s.c.retry(ctx, func(ctx context.Context) error {
		k, err := s.connected(ctx)
		if err != nil {
			return err
		}
		frame, err := json.Marshal(message[resetData]{"reset", req.wire(ctx)})
		if err != nil {
			return err
		}
		return k.call(ctx, frame, "observation", &res)
	})
	if err != nil {
		return Result{}, fmt.Errorf("reset: %w", err)
	}
	return res, nil
}

// wire is the reset's data; wait_s is worked out now, from what is left
// of ctx.
func (r ResetRequest) wire(ctx context.Context) resetData {
	d := resetData{TaskID: r.TaskID, ToolFormat: r.ToolFormat, MaxTurns: r.MaxTurns, EpisodeID: r.EpisodeID}
	if r.TaskID == "" || r.Split != "" {
		split, index := r.Split, r.Index
		if split == "" {
			split = "all"
		}
		d.Split, d.Index = &split, &index
	}
	switch dl, ok := ctx.Deadline(); {
	case r.Wait < 0:
		w := 0.0
		d.WaitS = &w
	case r.Wait > 0:
		w := r.Wait.Seconds()
		d.WaitS = &w
	case ok:
		// Leave time to read the CAPACITY_REACHED, should it come.
		left := time.Until(dl)
		w := max(0, left-min(left/10, 2*time.Second)).Seconds()
		d.WaitS = &w
	}
	return d
}

// Step sends the model's reply for the open turn and returns the server's
// answer: tool messages, the next prompt, or the final, done observation
// with the reward. A reply the episode refuses is CodeValidation and
// leaves the episode as it was. Step is never retried.
func (s *Session) Step(ctx context.Context, reply string) (Result, error) {
	frame, err := json.Marshal(message[stepData]{"step", stepData{reply}})
	if err != nil {
		return Result{}, fmt.Errorf("step: %w", err)
	}
	var res Result
	if err := s.roundTrip(ctx, frame, "observation", &res); err != nil {
		return Result{}, fmt.Errorf("step: %w", err)
	}
	return res, nil
}

// message is a client message: {"type": ..., "data": ...}.
type message[T any] struct {
	Type string `json:"type"`
	Data T      `json:"data"`
}

type stepData struct {
	Reply string `json:"reply"`
}

var stateFrame = []byte(`{"type":"state"}`)

// State returns the session's state. It does not count as activity for
// the server's idle timeout.
func (s *Session) State(ctx context.Context) (State, error) {
	var st State
	if err := s.roundTrip(ctx, stateFrame, "state", &st); err != nil {
		return State{}, fmt.Errorf("state: %w", err)
	}
	return st, nil
}

// Close ends the session: it sends a close message, so the server tears
// down the episode in play, and waits (up to 5 s) for the server to close
// the connection. With a call in flight (Close from another goroutine) it
// drops the connection at once instead, and the call returns ErrClosed;
// the server tears the episode down all the same. Close is idempotent.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	k := s.conn
	s.mu.Unlock()
	k.fail(ErrClosed)
	select {
	case <-k.done:
		return nil
	default:
	}
	if k.busy.Load() {
		k.abort(ErrClosed)
		<-k.done
		return nil
	}
	if k.write([]byte(`{"type":"close"}`)) == nil {
		t := time.NewTimer(closeWait)
		select {
		case <-k.done:
		case <-t.C:
		}
		t.Stop()
	}
	k.abort(ErrClosed)
	<-k.done
	return nil
}

// Done returns a channel that is closed when the session's connection
// ends: closed by the server (a shutdown, the idle timeout), lost, or by
// Close. Err then says why. A Reset after that connects again, and Done
// returns the new connection's channel.
func (s *Session) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn.done
}

// Err returns nil while the session's connection is open, else why it
// ended: an *Error with CodeShuttingDown when the server shut down, an
// error wrapping ErrDisconnected, or ErrClosed.
func (s *Session) Err() error {
	s.mu.Lock()
	k := s.conn
	s.mu.Unlock()
	select {
	case <-k.done:
		return k.failure()
	default:
		return nil
	}
}

// roundTrip sends frame on the current connection and decodes the answer.
func (s *Session) roundTrip(ctx context.Context, frame []byte, want string, out any) error {
	s.mu.Lock()
	k, closed := s.conn, s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return k.call(ctx, frame, want, out)
}

// connected returns the session's connection, opening a new one (once)
// when the last has ended.
func (s *Session) connected(ctx context.Context) (*conn, error) {
	s.mu.Lock()
	k, closed := s.conn, s.closed
	s.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	select {
	case <-k.done:
	default:
		return k, nil
	}
	k, err := s.c.dial(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed { // closed while dialling
		k.abort(ErrClosed)
		return nil, ErrClosed
	}
	s.conn = k
	return k, nil
}

// conn is one WebSocket connection. A reader goroutine reads every frame,
// answering pings meanwhile (so the server keeps a session whose caller is
// busy), and hands the text frames to call; a pinger checks the server.
type conn struct {
	ws      *websocket.Conn
	ping    time.Duration
	limit   int64
	replies chan []byte
	done    chan struct{} // closed when the reader has ended
	quit    chan struct{} // closed by abort
	quitted sync.Once
	writeMu sync.Mutex
	busy    atomic.Bool // a call waits for its answer

	mu       sync.Mutex
	err      error  // why the connection ended; the first reason wins
	shutdown *Error // a SHUTTING_DOWN the server sent
}

func newConn(ws *websocket.Conn, opts Options) *conn {
	k := &conn{ws: ws, ping: opts.PingInterval, limit: opts.MaxReplyBytes,
		replies: make(chan []byte, 4), done: make(chan struct{}), quit: make(chan struct{})}
	ws.SetReadLimit(opts.MaxReplyBytes)
	go k.read()
	if k.ping > 0 {
		go k.pinger()
	}
	return k
}

func (k *conn) read() {
	defer close(k.done)
	defer k.ws.Close()
	alive := func() {
		if k.ping > 0 {
			k.ws.SetReadDeadline(time.Now().Add(2 * k.ping)) //nolint:errcheck // fails only on a closed conn
		}
	}
	alive()
	k.ws.SetPongHandler(func(string) error { alive(); return nil })
	k.ws.SetPingHandler(func(data string) error {
		alive()
		// A failed pong shows up as a failed read soon enough.
		k.ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(writeWait)) //nolint:errcheck
		return nil
	})
	for {
		typ, b, err := k.ws.ReadMessage()
		if err != nil {
			k.fail(k.why(err))
			return
		}
		alive()
		if typ != websocket.TextMessage {
			continue
		}
		// The server says SHUTTING_DOWN unasked to an idle session before
		// it closes it: keep it as the reason the connection ends.
		if bytes.Contains(b, []byte(`"SHUTTING_DOWN"`)) {
			var e *Error
			if errors.As(decode(b, "", nil), &e) && e.Code == CodeShuttingDown {
				k.mu.Lock()
				k.shutdown = e
				k.mu.Unlock()
			}
		}
		select {
		case k.replies <- b:
		case <-k.quit:
			return
		}
	}
}

func (k *conn) pinger() {
	t := time.NewTicker(k.ping)
	defer t.Stop()
	for {
		select {
		case <-k.done:
			return
		case <-t.C:
			k.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)) //nolint:errcheck // the read deadline notices a dead peer
		}
	}
}

// why turns the read error that ended the connection into what callers
// see.
func (k *conn) why(err error) error {
	k.mu.Lock()
	shutdown := k.shutdown
	k.mu.Unlock()
	if shutdown != nil {
		return shutdown
	}
	var ce *websocket.CloseError
	var ne net.Error
	switch {
	case errors.As(err, &ce) && ce.Code == websocket.CloseAbnormalClosure:
		return fmt.Errorf("%w: it was cut without a close message (%s)", ErrDisconnected, ce.Text)
	case errors.As(err, &ce):
		reason := ce.Text
		if reason == "" {
			reason = map[int]string{websocket.CloseNormalClosure: "normal closure", websocket.CloseGoingAway: "going away"}[ce.Code]
		}
		return fmt.Errorf("%w: the server closed it (%d %s)", ErrDisconnected, ce.Code, reason)
	case errors.Is(err, websocket.ErrReadLimit):
		return fmt.Errorf("%w: an answer was over the %d-byte limit (Options.MaxReplyBytes)", ErrDisconnected, k.limit)
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%w: nothing heard from the server for %s (pings unanswered)", ErrDisconnected, 2*k.ping)
	}
	return fmt.Errorf("%w: %w", ErrDisconnected, err)
}

// fail records why the connection ends, unless a reason is known.
func (k *conn) fail(err error) {
	k.mu.Lock()
	if k.err == nil {
		k.err = err
	}
	k.mu.Unlock()
}

func (k *conn) failure() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err == nil {
		return ErrDisconnected
	}
	return k.err
}

// abort closes the connection now, for the reason given.
func (k *conn) abort(why error) {
	k.fail(why)
	k.quitted.Do(func() { close(k.quit) })
	k.ws.Close()
}

func (k *conn) write(frame []byte) error {
	k.writeMu.Lock()
	defer k.writeMu.Unlock()
	k.ws.SetWriteDeadline(time.Now().Add(writeWait)) //nolint:errcheck // fails only on a closed conn
	return k.ws.WriteMessage(websocket.TextMessage, frame)
}

// call sends frame and decodes the answer, of type want, into out. If ctx
// ends first the connection is closed: its answer, still to come, would
// be read as the answer to the next call.
func (k *conn) call(ctx context.Context, frame []byte, want string, out any) error {
	select {
	case <-k.done:
		return k.failure()
	default:
	}
	k.busy.Store(true)
	defer k.busy.Store(false)
	stop := context.AfterFunc(ctx, func() {
		k.abort(fmt.Errorf("%w: closed when a call's context ended", ErrDisconnected))
	})
	defer stop()
	if err := k.write(frame); err != nil {
		k.abort(fmt.Errorf("%w: %w", ErrDisconnected, err))
	}
	select {
	case b := <-k.replies:
		return decode(b, want, out)
	case <-k.done:
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w; the connection was closed, which ends the episode", err)
	}
	select { // an answer read just before the connection ended
	case b := <-k.replies:
		return decode(b, want, out)
	default:
		return k.failure()
	}
}

// decode reads one server frame: an error reply becomes an *Error, a
// frame of type want is decoded into out.
func decode(frame []byte, want string, out any) error {
	var env struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(frame, &env); err != nil {
		return fmt.Errorf("the server's answer is not a JSON message: %w", err)
	}
	switch env.Type {
	case "error":
		var w wireError
		if err := json.Unmarshal(env.Data, &w); err != nil {
			return fmt.Errorf("the server's error answer does not decode: %w", err)
		}
		return w.toError()
	case want:
		if err := json.Unmarshal(env.Data, out); err != nil {
			return fmt.Errorf("the server's %s answer does not decode: %w", want, err)
		}
		return nil
	}
	return fmt.Errorf("the server answered with a %q message, want %q", env.Type, want)
}
