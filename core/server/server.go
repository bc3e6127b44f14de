// Package server serves a bundle's tasks as an OpenEnv environment: HTTP
// endpoints for health, metadata, the task catalogue and metrics, and a
// WebSocket session protocol (/ws) in which each session plays episodes
// through an episode.Player.
package server

import (
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
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentenv/agentenv/core/episode"
)

// Defaults for zero Options fields.
const (
	DefaultMaxConcurrentEnvs = 64
	DefaultResetWait         = 600 * time.Second
	DefaultPingInterval      = 20 * time.Second
	DefaultPongTimeout       = 20 * time.Second
	DefaultMaxMessageBytes   = 16 << 20
	DefaultWriteTimeout      = 30 * time.Second
	DefaultTeardownTimeout   = 60 * time.Second
	// maxResetWait caps a client's wait_s so the duration cannot overflow.
	maxResetWait = 24 * time.Hour
)

// Info describes the served bundle for /metadata.
type Info struct {
	Name        string // the bundle's name
	Description string // first line of its README
	Readme      string // the README, or "" if none
	Version     string // agentenv's version
}

// Options configure a Server. Player and Catalog are required.
type Options struct {
	Player  episode.Player
	Catalog Catalog
	Info    Info
	// Token, when set, is required on every request but /health. The
	// server keeps only its digest.
	Token string
	// MaxConcurrentEnvs caps live episodes; further resets queue (FIFO).
	MaxConcurrentEnvs int
	// ResetWait is how long a queued reset waits when the client gives no
	// wait_s.
	ResetWait time.Duration
	// IdleTimeout closes a session (and its episode) after this long
	// without a reset or step; 0 never does.
	IdleTimeout time.Duration
	// PingInterval and PongTimeout keep sessions alive during long steps
	// and drop dead peers.
	PingInterval time.Duration
	PongTimeout  time.Duration
	// MaxMessageBytes caps an inbound frame; larger ones are answered with
	// MESSAGE_TOO_LARGE and discarded.
	MaxMessageBytes int64
	// MaxQueuedFrames caps the frames a session holds read but not yet
	// handled (inbox.go); past it, or past MaxMessageBytes of them, a
	// frame is answered QUEUE_FULL in its turn and dropped.
	MaxQueuedFrames int
	WriteTimeout    time.Duration
	// TeardownTimeout bounds each episode's Close.
	TeardownTimeout time.Duration
	Logger          hclog.Logger
	// PluginRestarts, when set, is read at each /metrics scrape: plugin
	// processes restarted after a crash.
	PluginRestarts func() float64
	// HTTP bounds what idle or slow connections hold (limits.go).
	HTTP HTTPLimits
	// Readiness, when set, holds every request but /health and /metrics
	// off with 503 PREPARING until its Ready is called (readiness.go), so
	// the server can listen while its envs build. nil: ready at once.
	Readiness *Readiness
	// Metrics are the series /metrics serves (nil = new ones). Give the
	// episode engine the same ones as its Observer for phase timings and
	// outcomes; a Metrics serves one Server.
	Metrics *Metrics
	// ErrorDetail sends clients the full detail of DEPLOY_FAILED errors
	// (server paths, env command lines, env output, which may print an
	// env's secrets); by default they get the env and a short cause, and
	// the detail goes to the log. For a server only its operator uses.
	ErrorDetail bool
}

// failureMessage is what a client is told of err (its code travels beside
// it); brief is set when the detail was left for the log.
func (s *Server) failureMessage(err error) (msg string, brief bool) {
	var epErr *episode.Error
	if !errors.As(err, &epErr) || epErr.Err == nil {
		return err.Error(), false
	}
	if !s.opts.ErrorDetail {
		if b, ok := epErr.Brief(); ok {
			return b, true
		}
	}
	return epErr.Err.Error(), false
}

// Server is an OpenEnv server over a Player. Use Handler with your own
// http.Server, or Serve; call Shutdown to drain either way.
type Server struct {
	opts     Options
	log      hclog.Logger
	token    tokenCheck
	metrics  *Metrics
	adm      *admission
	conns    *connLimiter
	upgrader websocket.Upgrader
	mux      *http.ServeMux
	ors      http.Handler // orsTaskAPI, also under a page named as the bundle
	handler  http.Handler

	mu       sync.Mutex
	sessions map[*session]struct{}
	pages    []string // HandlePage's prefixes
	// logins are the pages' login throttles, by prefix.
	logins   map[string]*loginThrottle
	sessWG   sync.WaitGroup
	closing  sync.WaitGroup // episodes being torn down after their session let go
	draining atomic.Bool
	stopping chan struct{} // closed when Shutdown starts
	stopOnce sync.Once
	httpSrv  atomic.Pointer[http.Server]
}

// New checks opts and builds a Server.
func New(opts Options) (*Server, error) {
	if opts.Player == nil {
		return nil, errors.New("server: Options.Player is required")
	}
	if opts.Catalog == nil {
		return nil, errors.New("server: Options.Catalog is required")
	}
	if opts.MaxConcurrentEnvs < 0 {
		return nil, fmt.Errorf("server: max concurrent envs must be at least 1, got %d", opts.MaxConcurrentEnvs)
	}
	if opts.IdleTimeout < 0 {
		return nil, fmt.Errorf("server: idle timeout must not be negative, got %s", opts.IdleTimeout)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if opts.MaxConcurrentEnvs == 0 {
		opts.MaxConcurrentEnvs = DefaultMaxConcurrentEnvs
	}
	def(&opts.ResetWait, DefaultResetWait)
	def(&opts.PingInterval, DefaultPingInterval)
	def(&opts.PongTimeout, DefaultPongTimeout)
	def(&opts.WriteTimeout, DefaultWriteTimeout)
	def(&opts.TeardownTimeout, DefaultTeardownTimeout)
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.MaxQueuedFrames <= 0 {
		opts.MaxQueuedFrames = DefaultMaxQueuedFrames
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	opts.HTTP = opts.HTTP.withDefaults()
	s := &Server{
		opts:     opts,
		log:      opts.Logger,
		token:    newTokenCheck(opts.Token),
		metrics:  opts.Metrics,
		sessions: map[*session]struct{}{},
		stopping: make(chan struct{}),
	}
	s.opts.Token = "" // only the digest stays
	if s.metrics == nil {
		s.metrics = NewMetrics()
	}
	s.metrics.registerRestarts(opts.PluginRestarts)
	s.conns = newConnLimiter(opts.HTTP.MaxConnections, s.metrics.reg, s.log)
	s.adm = newAdmission(opts.MaxConcurrentEnvs, func(active, queued int) {
		s.metrics.live.Set(float64(active))
		s.metrics.queued.Set(float64(queued))
	})
	s.upgrader = websocket.Upgrader{
		ReadBufferSize:  4096,
		WriteBufferSize: 4096,
		// Idle sessions hold no write buffer; one is taken per write.
		WriteBufferPool: &sync.Pool{},
		// handleWS has refused browsers on other sites (crossSiteBrowser).
		CheckOrigin: func(*http.Request) bool { return true },
		Error: func(w http.ResponseWriter, _ *http.Request, status int, reason error) {
			writeHTTPError(w, status, CodeValidation, "websocket upgrade failed: "+reason.Error())
		},
	}
	s.handler = s.gate(s.routes())
	return s, nil
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	s.mux = mux
	auth := func(h http.HandlerFunc) http.Handler { return s.requireToken(h) }
	mux.HandleFunc("GET /health", s.handleHealth)
	mux.HandleFunc("GET /livez", s.handleLive)
	mux.Handle("GET /metadata", auth(s.handleMetadata))
	mux.Handle("GET /schema", auth(s.handleSchema))
	mux.Handle("GET /openapi.json", auth(s.handleOpenAPI))
	mux.Handle("POST /mcp", auth(s.handleMCP))
	mux.Handle("GET /metrics", s.requireToken(promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})))
	mux.Handle("GET /ws", auth(s.handleWS))
	mux.Handle("GET /splits", auth(s.handleSplits))
	mux.Handle("GET /splits/{split}/tasks", auth(s.handleSplitTasks))
	mux.Handle("GET /tasks/{id...}", auth(s.handleTask))
	mux.Handle("GET /toolsets/{id}/tools", auth(s.handleToolsetTools))
	// Everything else: the ORS-style task API under /<bundle name>/, or 404.
	s.ors = s.orsTaskAPI()
	mux.Handle("/", s.requireToken(s.ors))
	return mux
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve serves on ln until Shutdown; it returns nil after a Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	hs := s.httpServer()
	if !s.httpSrv.CompareAndSwap(nil, hs) {
		return errors.New("server: Serve called twice")
	}
	if err := hs.Serve(s.conns.listener(ln)); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	}
	return nil
}

// Draining reports whether Shutdown has begun.
func (s *Server) Draining() bool { return s.draining.Load() }

// Shutdown stops admitting, tells every session SHUTTING_DOWN, tears down
// every episode and closes the listener. It returns when all of that is
// done or ctx ends (then it closes what is left at once).
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.draining.Store(true)
		close(s.stopping)
	})
	s.adm.close()
	s.mu.Lock()
	live := make([]*session, 0, len(s.sessions))
	for sess := range s.sessions {
		live = append(live, sess)
	}
	s.mu.Unlock()
	s.log.Info("shutting down", "sessions", len(live))
	// Tear every episode down at once, even those mid-step (Close may run
	// concurrently with Start and Step).
	var teardown sync.WaitGroup
	for _, sess := range live {
		teardown.Add(1)
		go func() {
			defer teardown.Done()
			sess.abort()
		}()
	}
	all := make(chan struct{})
	go func() {
		teardown.Wait()
		s.sessWG.Wait()
		// Sessions add to closing before they end, so this Wait follows
		// every Add.
		s.closing.Wait()
		close(all)
	}()
	var err error
	select {
	case <-all:
	case <-ctx.Done():
		err = fmt.Errorf("shutdown: %d sessions still closing: %w", s.sessionCount(), ctx.Err())
		s.mu.Lock()
		for sess := range s.sessions {
			sess.conn.Close()
		}
		s.mu.Unlock()
	}
	// The listener stays open through the drain so /health can say
	// "draining"; now it closes, after in-flight HTTP requests finish.
	// Hijacked WebSocket connections were ours and are closed already.
	if hs := s.httpSrv.Load(); hs != nil {
		if hs.Shutdown(ctx) != nil {
			hs.Close()
		}
	}
	return err
}

func (s *Server) sessionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	if s.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "healthy"})
}

// handleLive answers 200 while the process serves HTTP at all: preparing,
// serving or draining. It is the liveness probe's: /health answers 503
// while the envs build or the server drains, and a liveness probe on it
// killed a pod whose first env build was slow.
func (s *Server) handleLive(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "alive"})
}

func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeHTTPError(w, http.StatusServiceUnavailable, CodeShuttingDown, "server is shutting down")
		return
	}
	if origin, cross := crossSiteBrowser(r); cross {
		s.metrics.failures.WithLabelValues(CodeUnauthorized).Inc()
		writeHTTPError(w, http.StatusForbidden, CodeUnauthorized, fmt.Sprintf(
			"a WebSocket opened by a web page of another site (Origin %.200q) is refused: a trainer's client sends no Origin, or its own host's", origin))
		return
	}
	conn, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	sess := newSession(s, conn, r.RemoteAddr)
	s.mu.Lock()
	if s.draining.Load() {
		s.mu.Unlock()
		sess.refuse(&wireError{Code: CodeShuttingDown, Message: "server is shutting down"})
		return
	}
	s.sessions[sess] = struct{}{}
	s.sessWG.Add(1)
	s.mu.Unlock()
	s.metrics.sessions.Inc()
	go sess.run()
}

func (s *Server) removeSession(sess *session) {
	s.mu.Lock()
	delete(s.sessions, sess)
	s.mu.Unlock()
	s.metrics.sessions.Dec()
	s.sessWG.Done()
}

// writeJSON writes v as a JSON response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(map[string]string{"detail": "encode response: " + err.Error(), "code": CodeExecution})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n')) //nolint:errcheck // the client may be gone
}

// writeHTTPError writes the HTTP error shape: FastAPI's {"detail": ...}
// plus our code.
func writeHTTPError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]string{"detail": msg, "code": code})
}
