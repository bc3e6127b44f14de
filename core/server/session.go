package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/core/episode"
)

// frame is one message read off the socket, handed to the session loop.
type frame struct {
	binary   bool
	data     []byte
	oversize int64 // bytes read when the frame went past the limit; 0 if not
	refused  int   // frames dropped from a full inbox in this one's place (inbox.go)
}

// session is one WebSocket connection. A reader goroutine reads frames
// (answering pings meanwhile), the run loop handles them one at a time in
// order, and a pinger keeps the peer honest. Only run writes data frames.
type session struct {
	srv      *Server
	conn     *websocket.Conn
	log      hclog.Logger
	ctx      context.Context // ends on disconnect or shutdown
	cancel   context.CancelFunc
	inbox    *inbox
	readDone chan struct{}

	// id, remote and opened name the session in logs and on the /ui page.
	id, remote string
	opened     time.Time

	mu      sync.Mutex // guards ep, which Shutdown reads to abort, and pinger
	ep      episode.Episode
	aborted bool
	pinger  *time.Timer
	// waiting is when the reset in hand began to wait for a slot (zero
	// when none waits): the /ui page lists the queue.
	waiting time.Time

	// last is the episode the state message reports: the one in play, or
	// the one that ended last. Touched only by run.
	last       episode.Episode
	lastActive time.Time
	sentStop   bool
}

func newSession(s *Server, conn *websocket.Conn, remote string) *session {
	ctx, cancel := context.WithCancel(context.Background())
	var id [4]byte
	rand.Read(id[:]) //nolint:errcheck // never fails
	return &session{
		srv: s, conn: conn, ctx: ctx, cancel: cancel,
		id: hex.EncodeToString(id[:]), remote: remote, opened: time.Now(),
		log:      s.log.With("session", hex.EncodeToString(id[:]), "remote", remote),
		inbox:    newInbox(s.opts.MaxQueuedFrames, s.opts.MaxMessageBytes),
		readDone: make(chan struct{}),
	}
}

// refuse answers a connection that must not become a session.
func (s *session) refuse(e *wireError) {
	s.srv.metrics.failures.WithLabelValues(e.Code).Inc()
	s.conn.SetWriteDeadline(time.Now().Add(s.srv.opts.WriteTimeout))                                                                            //nolint:errcheck
	s.conn.WriteMessage(websocket.TextMessage, encodeError(e))                                                                                  //nolint:errcheck
	s.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, e.Message), time.Now().Add(time.Second)) //nolint:errcheck
	s.conn.Close()
	s.cancel()
}

func (s *session) run() {
	defer s.srv.removeSession(s)
	s.lastActive = time.Now()
	s.log.Debug("session opened")
	go s.readLoop()
	// A timer, not a goroutine, sends the pings: idle sessions stay cheap.
	s.mu.Lock()
	s.pinger = time.AfterFunc(s.srv.opts.PingInterval, s.ping)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.pinger.Stop()
		s.mu.Unlock()
	}()

	var idle <-chan time.Time
	var timer *time.Timer
	if d := s.srv.opts.IdleTimeout; d > 0 {
		timer = time.NewTimer(d)
		defer timer.Stop()
		idle = timer.C
	}
	for {
		if s.ctx.Err() != nil {
			s.finish()
			return
		}
		select {
		case <-s.inbox.ready:
			if !s.handleQueued() {
				return
			}
		case <-s.ctx.Done():
			s.finish()
			return
		case <-idle:
			left := s.srv.opts.IdleTimeout - time.Since(s.lastActive)
			if left > 0 {
				timer.Reset(left)
				continue
			}
			s.log.Info("session idle, closing", "idle_timeout", s.srv.opts.IdleTimeout, "episode", s.lastID())
			s.srv.metrics.expirations.Inc()
			s.closeEpisode("abandoned", episode.CauseIdleTimeout)
			s.closeConn(websocket.CloseNormalClosure, "idle timeout")
			s.cancel()
			return
		}
	}
}

// finish ends a session whose context ended: a shutdown tells the client,
// a disconnect just cleans up.
func (s *session) finish() {
	if s.srv.draining.Load() {
		s.closeEpisode("abandoned", episode.CauseServerShutdown)
		if !s.sentStop {
			s.sendError(&wireError{Code: CodeShuttingDown, Message: "server is shutting down; the episode was closed"})
		}
		s.closeConn(websocket.CloseGoingAway, "server shutting down")
		return
	}
	s.log.Debug("session disconnected", "episode", s.lastID())
	s.closeEpisode("abandoned", episode.CauseClientClosed)
	s.conn.Close()
}

// readLoop reads frames until the connection fails; each frame's size is
// checked while reading so an oversize one is discarded, not buffered.
func (s *session) readLoop() {
	defer close(s.readDone)
	defer s.cancel()
	deadline := s.srv.opts.PingInterval + s.srv.opts.PongTimeout
	s.conn.SetReadDeadline(time.Now().Add(deadline)) //nolint:errcheck
	s.conn.SetPongHandler(func(string) error {
		return s.conn.SetReadDeadline(time.Now().Add(deadline))
	})
	s.conn.SetPingHandler(func(data string) error {
		s.conn.SetReadDeadline(time.Now().Add(deadline)) //nolint:errcheck
		err := s.conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(s.srv.opts.WriteTimeout))
		if errors.Is(err, websocket.ErrCloseSent) {
			return nil
		}
		return err
	})
	limit := s.srv.opts.MaxMessageBytes
	for {
		kind, r, err := s.conn.NextReader()
		if err != nil {
			if !websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived) {
				s.log.Debug("read ended", "error", err)
			}
			return
		}
		data, err := io.ReadAll(io.LimitReader(r, limit+1))
		f := frame{binary: kind == websocket.BinaryMessage, data: data}
		if err == nil && int64(len(data)) > limit {
			n, derr := io.Copy(io.Discard, r)
			f = frame{oversize: int64(len(data)) + n}
			err = derr
		}
		if err != nil {
			s.log.Debug("read ended", "error", err)
			return
		}
		// push never waits: the reader goes on answering pings while a
		// long step runs with frames queued behind it.
		s.inbox.push(f)
		s.conn.SetReadDeadline(time.Now().Add(deadline)) //nolint:errcheck
	}
}

// ping sends one ping and schedules the next.
func (s *session) ping() {
	if s.ctx.Err() != nil {
		return
	}
	if err := s.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(s.srv.opts.WriteTimeout)); err != nil {
		return // the read deadline will end the session
	}
	s.mu.Lock()
	s.pinger.Reset(s.srv.opts.PingInterval)
	s.mu.Unlock()
}

// handle answers one frame; false ends the session.
func (s *session) handle(f frame) bool {
	switch {
	case f.oversize > 0:
		s.sendError(&wireError{Code: CodeMessageTooLarge, Message: fmt.Sprintf(
			"message of %d bytes is over the limit of %d bytes; it was discarded", f.oversize, s.srv.opts.MaxMessageBytes)})
		return true
	case f.binary:
		s.sendError(&wireError{Code: CodeInvalidJSON, Message: "Invalid JSON: binary frame; send each message as one JSON object in a text frame"})
		return true
	}
	msg, werr := parseInbound(f.data)
	if werr != nil {
		s.sendError(werr)
		return true
	}
	switch msg.Type {
	case "reset":
		s.reset(msg)
		s.lastActive = time.Now()
	case "step":
		s.step(msg)
		s.lastActive = time.Now()
	case "state":
		s.send(encodeState(s.state()))
	case "close":
		s.closeEpisode("abandoned", episode.CauseClientClosed)
		s.closeConn(websocket.CloseNormalClosure, "")
		s.cancel()
		return false
	case "mcp":
		s.sendError(&wireError{Code: CodeUnknownType, Message: "Unknown message type: mcp (this server plays episodes through step replies; direct MCP access is not served)"})
	default:
		s.sendError(&wireError{Code: CodeUnknownType, Message: fmt.Sprintf("Unknown message type: %s", msg.Type)})
	}
	return true
}

// lastID is the id of the episode the session played last, for logs.
func (s *session) lastID() string {
	if s.last == nil {
		return ""
	}
	return s.last.ID()
}

// state reads the last episode's state; the session keeps no copy of it.
func (s *session) state() stateData {
	var st stateData
	if s.last != nil {
		es := s.last.State()
		st.StepCount, st.Turn, st.Done = es.Turn, es.Turn, es.Done
		st.EpisodeID, st.TaskID = &es.EpisodeID, &es.TaskID
	}
	s.mu.Lock()
	st.Live = s.ep != nil
	s.mu.Unlock()
	return st
}

func (s *session) reset(msg inbound) {
	rd, werr := parseReset(msg.Data, msg.HasData)
	if werr != nil {
		s.sendError(werr)
		return
	}
	s.closeEpisode("abandoned", episode.CauseClientClosed) // a reset replaces the episode in play
	s.last = nil

	wait := s.srv.opts.ResetWait
	if rd.WaitS != nil {
		wait = time.Duration(math.Min(*rd.WaitS, maxResetWait.Seconds()) * float64(time.Second))
	}
	start := time.Now()
	s.mu.Lock()
	s.waiting = start
	s.mu.Unlock()
	err := s.srv.adm.acquire(s.ctx, wait)
	s.mu.Lock()
	s.waiting = time.Time{}
	s.mu.Unlock()
	rd.Req.Queued = time.Since(start)
	s.srv.metrics.queueWait.Observe(rd.Req.Queued.Seconds())
	switch {
	case err == nil:
	case errors.Is(err, errCapacity):
		active, queued := s.srv.adm.counts()
		s.sendError(&wireError{Code: CodeCapacity, Message: fmt.Sprintf(
			"Server at capacity: %d/%d episodes live, %d resets queued; waited %.1fs for a slot",
			active, s.srv.opts.MaxConcurrentEnvs, queued, time.Since(start).Seconds()),
			Extra: map[string]any{"active_sessions": active, "max_sessions": s.srv.opts.MaxConcurrentEnvs, "queued": queued}})
		return
	default:
		s.replyFailure(err)
		return
	}
	ep, err := s.srv.opts.Player.Play(rd.Req)
	if err != nil {
		s.srv.adm.release()
		s.replyFailure(err)
		return
	}
	s.mu.Lock()
	s.ep = ep
	aborted := s.aborted
	s.mu.Unlock()
	if aborted {
		// Shutdown looked before this episode existed; it is ours to close.
		s.closeEpisode("abandoned", episode.CauseServerShutdown)
		s.replyFailure(errShuttingDown)
		return
	}
	obs, err := ep.Start(s.ctx)
	if err != nil {
		s.log.Info("episode failed to start", "episode", ep.ID(), "error", err)
		s.closeEpisode(s.failureOutcome(), episode.CauseClientClosed)
		s.replyFailureOf(err, ep.ID())
		return
	}
	s.last = ep
	s.log.Debug("episode started", "episode", ep.ID(), "task", obs.TaskID)
	s.reply(obs)
}

func (s *session) step(msg inbound) {
	s.mu.Lock()
	ep := s.ep
	s.mu.Unlock()
	if ep == nil {
		why := "no episode in this session: send reset first"
		if s.last != nil && s.last.State().Done {
			why = "the episode is done: send reset to play another"
		}
		s.sendError(&wireError{Code: CodeNoEpisode, Message: why})
		return
	}
	reply, werr := stepReply(msg)
	if werr != nil {
		s.sendError(werr)
		return
	}
	obs, err := ep.Step(s.ctx, reply)
	if err != nil {
		if episode.CodeOf(err) != episode.CodeValidation || s.srv.draining.Load() {
			s.log.Info("episode failed", "episode", ep.ID(), "error", err)
			s.closeEpisode(s.failureOutcome(), episode.CauseClientClosed)
		}
		s.replyFailure(err)
		return
	}
	s.reply(obs)
}

// reply sends an observation; a done one ends the episode, whose teardown
// runs in the background so the client is not kept waiting on it.
func (s *session) reply(obs episode.Observation) {
	b, err := encodeObservation(obs)
	if err != nil {
		s.closeEpisode("failed", "")
		s.sendError(&wireError{Code: CodeExecution, Message: "episode " + s.lastID() + ": " + err.Error()})
		return
	}
	if obs.Done {
		s.closeEpisode("done", "") // in the background: the reply does not wait
	}
	s.send(b)
}

// replyFailure sends err as an error reply with its code; during a
// shutdown every failure is SHUTTING_DOWN.
func (s *session) replyFailure(err error) { s.replyFailureOf(err, s.lastID()) }

// replyFailureOf is replyFailure for a failure of episode id.
func (s *session) replyFailureOf(err error, id string) {
	if s.srv.draining.Load() || errors.Is(err, errShuttingDown) {
		s.sentStop = true
		s.sendError(&wireError{Code: CodeShuttingDown, Message: "server is shutting down; the episode was closed"})
		return
	}
	if errors.Is(err, context.Canceled) && s.ctx.Err() != nil {
		return // the client left; nobody to answer
	}
	msg, brief := s.srv.failureMessage(err)
	if brief {
		msg += fmt.Sprintf(" (episode %s; the server's log has the details)", id)
	}
	s.sendError(&wireError{Code: string(episode.CodeOf(err)), Message: msg})
}

// closeEpisode ends the episode in play, if any: its outcome is counted
// now, and it is torn down in the background, its slot freed once its envs
// are gone (so live envs never exceed the capacity). cause is why, should
// it not have ended yet (a shutdown under way overrides it).
func (s *session) closeEpisode(outcome string, cause episode.Cause) {
	s.mu.Lock()
	ep := s.ep
	s.ep = nil
	s.mu.Unlock()
	if ep == nil {
		return
	}
	if s.srv.draining.Load() {
		cause = episode.CauseServerShutdown
	}
	if cause != "" {
		ep.Abandon(cause)
	}
	s.srv.metrics.episodes.WithLabelValues(outcome).Inc()
	s.srv.closing.Add(1)
	go func() {
		defer s.srv.closing.Done()
		ctx, cancel := context.WithTimeout(context.Background(), s.srv.opts.TeardownTimeout)
		defer cancel()
		if err := ep.Close(ctx); err != nil {
			s.log.Warn("episode teardown failed", "episode", ep.ID(), "error", err)
		}
		s.srv.adm.release()
	}()
}

// abort is Shutdown's hook: end the session's context and tear its
// episode down now, concurrently with whatever run is doing.
func (s *session) abort() {
	s.mu.Lock()
	s.aborted = true
	ep := s.ep
	s.mu.Unlock()
	if ep != nil {
		ep.Abandon(episode.CauseServerShutdown) // before the cancel cuts a call in flight short
	}
	s.cancel()
	if ep != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.srv.opts.TeardownTimeout)
		defer cancel()
		if err := ep.Close(ctx); err != nil {
			s.log.Warn("episode teardown failed", "episode", ep.ID(), "error", err)
		}
	}
}

func (s *session) send(b []byte) {
	s.conn.SetWriteDeadline(time.Now().Add(s.srv.opts.WriteTimeout)) //nolint:errcheck
	if err := s.conn.WriteMessage(websocket.TextMessage, b); err != nil {
		s.log.Debug("write failed", "error", err)
		s.cancel()
	}
}

func (s *session) sendError(e *wireError) {
	s.srv.metrics.failures.WithLabelValues(e.Code).Inc()
	s.send(encodeError(e))
}

// closeConn sends a close frame, waits briefly for the peer's, and closes.
func (s *session) closeConn(code int, reason string) {
	s.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second)) //nolint:errcheck
	select {
	case <-s.readDone:
	case <-time.After(time.Second):
	}
	s.conn.Close()
}
