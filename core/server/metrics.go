package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Episode phases timed by the server. deploy is Start (deploy, setup,
// first prompt); step is a Step that leaves the episode open; verify is the
// Step that ends it (its tool calls plus the verifiers and reward);
// teardown is Close.
const (
	phaseDeploy   = "deploy"
	phaseStep     = "step"
	phaseVerify   = "verify"
	phaseTeardown = "teardown"
)

// metrics are the server's Prometheus series, on a registry of its own so
// that several servers can live in one process (tests).
type metrics struct {
	reg         *prometheus.Registry
	live        prometheus.Gauge
	queued      prometheus.Gauge
	sessions    prometheus.Gauge
	queueWait   prometheus.Histogram
	phase       *prometheus.HistogramVec
	failures    *prometheus.CounterVec
	episodes    *prometheus.CounterVec
	expirations prometheus.Counter
}

// latencyBuckets span a sub-millisecond step to a minutes-long deploy.
var latencyBuckets = []float64{
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10, 30, 60, 120, 300, 600,
}

func newMetrics(restarts func() float64) *metrics {
	m := &metrics{
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
			Name: "agentenv_reset_queue_wait_seconds", Help: "Time a reset waited for a slot.", Buckets: latencyBuckets,
		}),
		phase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentenv_episode_phase_seconds", Help: "Latency of episode phases: deploy, step, verify, teardown.", Buckets: latencyBuckets,
		}, []string{"phase"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentenv_errors_total", Help: "Error replies sent, by wire code.",
		}, []string{"code"}),
		episodes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentenv_episodes_total", Help: "Episodes ended, by outcome: done, failed, abandoned (closed before done).",
		}, []string{"outcome"}),
		expirations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentenv_sessions_expired_total", Help: "Sessions closed by the idle timeout.",
		}),
	}
	m.reg.MustRegister(m.live, m.queued, m.sessions, m.queueWait, m.phase, m.failures, m.episodes, m.expirations,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, p := range []string{phaseDeploy, phaseStep, phaseVerify, phaseTeardown} {
		m.phase.WithLabelValues(p) // so every phase shows before its first sample
	}
	if restarts != nil {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "agentenv_plugin_restarts_total", Help: "Plugin processes restarted after a crash.",
		}, restarts))
	}
	return m
}
