package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of HTTPLimits.
const (
	DefaultHTTPReadTimeout  = 30 * time.Second
	DefaultHTTPWriteTimeout = 60 * time.Second
	DefaultHTTPIdleTimeout  = 60 * time.Second
	DefaultMaxConnections   = 4096
	// readHeaderTimeout bounds a request's headers when ReadTimeout is longer.
	readHeaderTimeout = 10 * time.Second
)

// HTTPLimits bound what connections can hold, so that idle or slow
// clients cannot use up the server's file descriptors. Zero fields take
// the defaults. A WebSocket session is bounded by these only until its
// upgrade; after it, pings, PongTimeout and the session's IdleTimeout do.
type HTTPLimits struct {
	// ReadTimeout bounds reading one request, headers and body.
	ReadTimeout time.Duration
	// WriteTimeout bounds handling one request and writing its response
	// (a toolset's first /tools call, which deploys an env, gets longer).
	WriteTimeout time.Duration
	// IdleTimeout closes a kept-alive connection with no request this long.
	IdleTimeout time.Duration
	// MaxConnections caps open connections, WebSocket sessions included.
	// A connection past it is answered 503 and closed.
	MaxConnections int
}

func (l HTTPLimits) withDefaults() HTTPLimits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.ReadTimeout, DefaultHTTPReadTimeout)
	def(&l.WriteTimeout, DefaultHTTPWriteTimeout)
	def(&l.IdleTimeout, DefaultHTTPIdleTimeout)
	if l.MaxConnections <= 0 {
		l.MaxConnections = DefaultMaxConnections
	}
	return l
}

// OpenFilesNeeded is the open-file limit a server with these caps needs
// (measured: docs/performance.md, one server and thousands of sessions):
// a descriptor per connection, one per live episode's MCP connection to its
// env, and room for plugins, listeners and logs.
func OpenFilesNeeded(maxConnections, maxConcurrentEnvs int) uint64 {
	return uint64(maxConnections) + uint64(maxConcurrentEnvs) + 256
}

// httpServer is the http.Server Serve runs, with the limits applied.
func (s *Server) httpServer() *http.Server {
	l := s.opts.HTTP
	var rl syscall.Rlimit
	// Go raises the soft limit to the hard one at start; below the need,
	// descriptors run out before the caps can answer.
	need := OpenFilesNeeded(l.MaxConnections, s.opts.MaxConcurrentEnvs)
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Cur < need {
		s.log.Warn(fmt.Sprintf("the open-file limit (ulimit -n) is %d; this server may need %d: one per connection (--max-connections), one more per live episode (its env's MCP connection, --max-concurrent-envs) and 256 for plugins and logs. Raise the hard limit (ulimit -Hn %d, or LimitNOFILE= in a systemd unit) or lower the caps",
			rl.Cur, need, need), "open_file_limit", rl.Cur, "max_connections", l.MaxConnections, "max_concurrent_envs", s.opts.MaxConcurrentEnvs)
	}
	return &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: min(readHeaderTimeout, l.ReadTimeout),
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		ErrorLog:          s.log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
}

// extendWriteDeadline gives a handler that legitimately runs long (up to
// d) its own deadline, WriteTimeout past d.
func (s *Server) extendWriteDeadline(w http.ResponseWriter, d time.Duration) {
	//nolint:errcheck // a writer without deadlines (a test recorder) keeps none
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d + s.opts.HTTP.WriteTimeout))
}

// connLimiter caps open connections. Its slots are taken in Accept and
// given back when the connection closes, whoever closes it (the HTTP
// server, or a WebSocket session that hijacked it).
type connLimiter struct {
	max      int
	slots    chan struct{}
	refusing chan struct{} // bounds the goroutines answering refused connections
	open     prometheus.Gauge
	refused  prometheus.Counter
	log      hclog.Logger
}

func newConnLimiter(max int, reg prometheus.Registerer, log hclog.Logger) *connLimiter {
	l := &connLimiter{
		max: max, slots: make(chan struct{}, max), refusing: make(chan struct{}, 64), log: log,
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentenv_connections_open", Help: "Open client connections, WebSocket sessions included.",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentenv_connections_refused_total", Help: "Connections refused (503) because --max-connections were open.",
		}),
	}
	reg.MustRegister(l.open, l.refused)
	return l
}

// listener wraps ln so that it never hands out more than max connections.
func (l *connLimiter) listener(ln net.Listener) net.Listener {
	return &cappedListener{Listener: ln, l: l}
}

type cappedListener struct {
	net.Listener
	l *connLimiter
}

func (cl *cappedListener) Accept() (net.Conn, error) {
	l := cl.l
	for {
		c, err := cl.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			l.open.Inc()
			return &cappedConn{Conn: c, l: l}, nil
		default:
			l.refuse(c)
		}
	}
}

// refusal is the whole answer to a connection past the cap.
var refusal = func() string {
	body := `{"detail":"server has too many open connections; retry later","code":"` + CodeCapacity + `"}` + "\n"
	return fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\nRetry-After: 1\r\n\r\n%s", len(body), body)
}()

// refuse answers c 503 and closes it. It reads what the client sent for a
// moment first, so the close does not reset the connection before the
// client has read the answer.
func (l *connLimiter) refuse(c net.Conn) {
	l.refused.Inc()
	c.SetDeadline(time.Now().Add(time.Second)) //nolint:errcheck
	io.WriteString(c, refusal)                 //nolint:errcheck // the client may be gone
	select {
	case l.refusing <- struct{}{}:
	default:
		c.Close() // a flood: no lingering
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		if tc, ok := c.(*net.TCPConn); ok {
			tc.CloseWrite() //nolint:errcheck
		}
		io.Copy(io.Discard, io.LimitReader(c, 64<<10)) //nolint:errcheck // until the client closes or the deadline
		c.Close()
	}()
}

type cappedConn struct {
	net.Conn
	l    *connLimiter
	once sync.Once
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		<-c.l.slots
		c.l.open.Dec()
	})
	return err
}

// CloseWrite keeps the HTTP server's graceful close (shut the write side,
// then wait for the client) working through the wrapper.
func (c *cappedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
