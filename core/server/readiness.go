package server

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// CodePreparing answers every request but /health and /metrics while the
// server still prepares its envs (HTTP 503 with Retry-After, a refused
// WebSocket upgrade included): clients that wait out a 503 wait it out.
const CodePreparing = "PREPARING"

// preparingRetryAfter is the Retry-After of a PREPARING answer, seconds.
const preparingRetryAfter = "2"

// Readiness tracks what a server still prepares before it serves
// episodes: each env's build, in order. A server given one (Options.
// Readiness) listens at once but answers /health with 503
// {"status":"preparing", ...} and everything else with PREPARING until
// Ready is called. Its methods are safe for concurrent use.
type Readiness struct {
	ready atomic.Bool
	now   func() time.Time

	mu    sync.Mutex
	start time.Time
	envs  []*envPrep
}

type envPrep struct {
	name       string
	state      string // "waiting", "building", "ready"
	began, end time.Time
}

// NewReadiness tracks the preparation of envs, in the order given.
func NewReadiness(envs []string) *Readiness {
	r := &Readiness{now: time.Now}
	r.start = r.now()
	for _, n := range envs {
		r.envs = append(r.envs, &envPrep{name: n, state: "waiting"})
	}
	return r
}

// Building records that env's build began.
func (r *Readiness) Building(env string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.env(env)
	e.state, e.began = "building", r.now()
}

// Built records that env is ready.
func (r *Readiness) Built(env string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.env(env)
	if e.began.IsZero() {
		e.began = r.now()
	}
	e.state, e.end = "ready", r.now()
}

// env is env's entry, added when it was not listed. r.mu is held.
func (r *Readiness) env(name string) *envPrep {
	for _, e := range r.envs {
		if e.name == name {
			return e
		}
	}
	e := &envPrep{name: name, state: "waiting"}
	r.envs = append(r.envs, e)
	return e
}

// Ready ends the preparation: from now on the server serves everything.
func (r *Readiness) Ready() { r.ready.Store(true) }

// IsReady reports whether Ready was called. A nil Readiness is ready.
func (r *Readiness) IsReady() bool { return r == nil || r.ready.Load() }

// EnvStatus is one env's line in a preparing /health.
type EnvStatus struct {
	Env      string  `json:"env"`
	State    string  `json:"state"` // waiting, building, ready
	ElapsedS float64 `json:"elapsed_s"`
}

// PreparingStatus is the body of /health while preparing.
type PreparingStatus struct {
	Status   string      `json:"status"` // "preparing"
	Message  string      `json:"message"`
	ElapsedS float64     `json:"elapsed_s"`
	Envs     []EnvStatus `json:"envs"`
}

// Status says what is being prepared, and for how long.
func (r *Readiness) Status() PreparingStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	st := PreparingStatus{Status: "preparing", ElapsedS: secs(now.Sub(r.start)), Envs: []EnvStatus{}}
	var building []string
	waiting := 0
	for _, e := range r.envs {
		es := EnvStatus{Env: e.name, State: e.state}
		switch e.state {
		case "building":
			es.ElapsedS = secs(now.Sub(e.began))
			building = append(building, fmt.Sprintf("env %s is building (%s so far)", e.name, now.Sub(e.began).Round(time.Second)))
		case "ready":
			es.ElapsedS = secs(e.end.Sub(e.began))
		default:
			waiting++
		}
		st.Envs = append(st.Envs, es)
	}
	switch {
	case len(building) > 0:
		st.Message = "still preparing: " + strings.Join(building, ", ")
	case waiting > 0:
		if waiting == 1 {
			st.Message = "still preparing: 1 env waits to be built"
		} else {
			st.Message = fmt.Sprintf("still preparing: %d envs wait to be built", waiting)
		}
	default:
		st.Message = "still preparing: starting"
	}
	if waiting > 0 && len(building) > 0 {
		st.Message += fmt.Sprintf("; %d more to build", waiting)
	}
	return st
}

func secs(d time.Duration) float64 { return float64(d.Milliseconds()) / 1e3 }

// gate serves h once the server is ready. Before, /health says preparing,
// /metrics and pages (HandlePage) are served, and every other request (after the token check, so
// a wrong token is still told so) gets 503 PREPARING.
func (s *Server) gate(h http.Handler) http.Handler {
	r := s.opts.Readiness
	if r == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.IsReady() || s.draining.Load() || req.URL.Path == "/metrics" || req.URL.Path == "/livez" || s.isPage(req.URL.Path) {
			h.ServeHTTP(w, req)
			return
		}
		st := r.Status()
		w.Header().Set("Retry-After", preparingRetryAfter)
		if req.URL.Path == "/health" {
			writeJSON(w, http.StatusServiceUnavailable, st)
			return
		}
		if !s.token.allowed(req) {
			h.ServeHTTP(w, req) // answers 401
			return
		}
		writeHTTPError(w, http.StatusServiceUnavailable, CodePreparing,
			st.Message+"; retry shortly, or poll /health until it answers 200")
	})
}
