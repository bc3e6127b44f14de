package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/agentenv/agentenv/core/episode"
)

// Metrics are the server's Prometheus series, on a registry of their own
// so that several servers can live in one process (tests). They are also
// the episode engine's Observer: give the same Metrics to the engine
// (episode.Config.Observer) and to the server (Options.Metrics), and the
// engine's phase timings and episode outcomes show on /metrics.
type Metrics struct {
	reg         *prometheus.Registry
	live        prometheus.Gauge
	queued      prometheus.Gauge
	sessions    prometheus.Gauge
	queueWait   prometheus.Histogram
	phase       *prometheus.HistogramVec
	failures    *prometheus.CounterVec
	episodes    *prometheus.CounterVec
	outcomes    *prometheus.CounterVec
	expirations prometheus.Counter
	resets      *prometheus.CounterVec
	resetTime   *prometheus.HistogramVec
	reuses      *prometheus.CounterVec
	reuseDepth  *prometheus.HistogramVec
}

var (
	_ episode.Observer      = (*Metrics)(nil)
	_ episode.ReuseObserver = (*Metrics)(nil)
)

// depthBuckets span episodes per deploy of a reusable env.
var depthBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}

// latencyBuckets span a sub-millisecond step to a minutes-long deploy.
var latencyBuckets = []float64{
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10, 30, 60, 120, 300, 600,
}

// NewMetrics makes the series, registered on a registry of their own.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		live: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentenv_episodes_live", Help: "Episodes holding a capacity slot (deploying, in play or tearing down).",
		}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentenv_reset_queue_depth", Help: "Resets waiting for a free slot.",
		}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentenv_sessions_open", Help: "Open WebSocket sessions.",
		}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "agentenv_reset_queue_wait_seconds", Help: "Time a reset waited for a slot (every reset, those refused CAPACITY_REACHED included).", Buckets: latencyBuckets,
		}),
		phase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentenv_episode_phase_seconds",
			Help: "Time in each episode phase (queue, deploy, ready, setup, step, tool, verify, teardown), by sandbox and env; tool is part of step.", Buckets: latencyBuckets,
		}, []string{"phase", "sandbox", "env"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentenv_errors_total", Help: "Error replies sent, by wire code.",
		}, []string{"code"}),
		episodes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentenv_episodes_total", Help: "Episodes ended, by outcome: done, failed, abandoned (closed before done).",
		}, []string{"outcome"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentenv_episode_outcomes_total",
			Help: "Episodes ended and torn down, by outcome, cause and source (infrastructure, model, task, client, none), sandbox and env.",
		}, []string{"outcome", "cause", "source", "sandbox", "env"}),
		expirations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentenv_sessions_expired_total", Help: "Sessions closed by the idle timeout.",
		}),
		resets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentenv_env_resets_total",
			Help: "Resets of envs that declare reuse (env.toml reuse = N), by result: ok (the env went back to the pool) or failed (it was torn down).",
		}, []string{"result", "sandbox", "env"}),
		resetTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentenv_env_reset_seconds", Help: "Time of each reset call of a reusable env, failed ones included.", Buckets: latencyBuckets,
		}, []string{"sandbox", "env"}),
		reuses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentenv_env_reuses_total", Help: "Episodes given an env an earlier episode had (reset between them) instead of a fresh deploy.",
		}, []string{"sandbox", "env"}),
		reuseDepth: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentenv_env_reuse_depth", Help: "Episodes one deploy of a reusable env served, observed at its teardown.", Buckets: depthBuckets,
		}, []string{"sandbox", "env"}),
	}
	m.reg.MustRegister(m.live, m.queued, m.sessions, m.queueWait, m.phase, m.failures, m.episodes, m.outcomes, m.expirations,
		m.resets, m.resetTime, m.reuses, m.reuseDepth,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Prime makes every phase and outcome series of the sandbox's envs show,
// at zero, before its first sample (dashboards then read 0, not "no data").
func (m *Metrics) Prime(sandbox string, envs []string) {
	for _, env := range envs {
		for _, p := range episode.Phases {
			m.phase.WithLabelValues(string(p), sandbox, env)
		}
		for _, c := range episode.Causes {
			outcome := episode.OutcomeFailed
			switch episode.SourceOf(c) {
			case episode.SourceNone, episode.SourceModel:
				outcome = episode.OutcomeDone
			case episode.SourceClient:
				outcome = episode.OutcomeAbandoned
			}
			if c == episode.CauseServerShutdown {
				outcome = episode.OutcomeAbandoned
			}
			m.outcomes.WithLabelValues(string(outcome), string(c), string(episode.SourceOf(c)), sandbox, env)
		}
	}
}

// ObserveSpan records one phase's time (episode.Observer).
func (m *Metrics) ObserveSpan(s episode.Span) {
	m.phase.WithLabelValues(string(s.Phase), s.Sandbox, s.Env).Observe(s.Took.Seconds())
}

// EpisodeEnded counts an episode's outcome (episode.Observer).
func (m *Metrics) EpisodeEnded(r episode.Result) {
	env := ""
	if envs := r.Envs(); len(envs) > 0 {
		env = envs[0]
	}
	m.outcomes.WithLabelValues(string(r.Outcome), string(r.Cause), string(r.Source()), r.Sandbox, env).Inc()
}

// ObserveReuse counts a reusable env's resets, reuses and depth
// (episode.ReuseObserver).
func (m *Metrics) ObserveReuse(ev episode.ReuseEvent) {
	switch ev.Kind {
	case episode.ReuseReset, episode.ReuseResetFailed:
		result := "ok"
		if ev.Kind == episode.ReuseResetFailed {
			result = "failed"
		}
		m.resets.WithLabelValues(result, ev.Sandbox, ev.Env).Inc()
		m.resetTime.WithLabelValues(ev.Sandbox, ev.Env).Observe(ev.Took.Seconds())
	case episode.ReuseTaken:
		m.reuses.WithLabelValues(ev.Sandbox, ev.Env).Inc()
	case episode.ReuseRetired:
		m.reuseDepth.WithLabelValues(ev.Sandbox, ev.Env).Observe(float64(ev.Depth))
	}
}

// Register adds series of other parts (the transcript writer's) to
// /metrics.
func (m *Metrics) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// registerRestarts adds the plugin restarts counter, read at each scrape.
func (m *Metrics) registerRestarts(restarts func() float64) {
	if restarts == nil {
		return
	}
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "agentenv_plugin_restarts_total", Help: "Plugin processes restarted after a crash.",
	}, restarts))
}
