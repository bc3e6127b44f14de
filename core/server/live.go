package server

import (
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/agentenv/agentenv/core/episode"
)

// Live is what the server is doing now, for a person watching (the /ui
// page): the capacity and its queue as /metrics reports them, every open
// session with the episode it plays, and the episode counters since start.
type Live struct {
	// Preparing is what the server still prepares ("" once it serves).
	Preparing string `json:"preparing,omitempty"`
	Draining  bool   `json:"draining"`
	// Capacity is --max-concurrent-envs; Active the slots held (episodes
	// deploying, in play or tearing down: agentenv_episodes_live); Queued
	// the resets waiting for one (agentenv_reset_queue_depth).
	Capacity int           `json:"capacity"`
	Active   int           `json:"active"`
	Queued   int           `json:"queued"`
	Sessions []LiveSession `json:"sessions"`
	// Outcomes counts the episodes ended since start by outcome and cause
	// (agentenv_episode_outcomes_total, summed over sandboxes and envs);
	// Errors the error replies by wire code (agentenv_errors_total).
	Outcomes map[string]map[string]float64 `json:"outcomes"`
	Errors   map[string]float64            `json:"errors"`
}

// LiveSession is one open WebSocket session.
type LiveSession struct {
	ID     string    `json:"id"`
	Remote string    `json:"remote"`
	Opened time.Time `json:"opened"`
	// WaitingSince is set while the session's reset waits in the queue.
	WaitingSince *time.Time `json:"waiting_since,omitempty"`
	// Episode is the episode in play; nil when there is none.
	Episode *LiveEpisode `json:"episode,omitempty"`
}

// LiveEpisode is an episode in play, so far.
type LiveEpisode struct {
	EpisodeID string `json:"episode_id"`
	TaskID    string `json:"task_id"`
	Split     string `json:"split,omitempty"`
	Index     *int   `json:"index,omitempty"`
	Turns     int    `json:"turns"` // model replies taken
	// Began is when it was made, after its queue wait.
	Began time.Time `json:"began"`
	// Outcome and Cause are set once it ended, while it is torn down.
	Outcome episode.Outcome `json:"outcome,omitempty"`
	Cause   episode.Cause   `json:"cause,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// Live reports what the server is doing now. Safe to call at any time.
func (s *Server) Live() Live {
	l := Live{Draining: s.draining.Load(), Capacity: s.opts.MaxConcurrentEnvs}
	if r := s.opts.Readiness; !r.IsReady() {
		l.Preparing = r.Status().Message
	}
	l.Active, l.Queued = s.adm.counts()
	s.mu.Lock()
	live := make([]*session, 0, len(s.sessions))
	for sess := range s.sessions {
		live = append(live, sess)
	}
	s.mu.Unlock()
	l.Sessions = make([]LiveSession, 0, len(live))
	for _, sess := range live {
		ls := LiveSession{ID: sess.id, Remote: sess.remote, Opened: sess.opened}
		sess.mu.Lock()
		ep, waiting := sess.ep, sess.waiting
		sess.mu.Unlock()
		if !waiting.IsZero() {
			ls.WaitingSince = &waiting
		}
		if ep != nil {
			r := ep.Result()
			ls.Episode = &LiveEpisode{EpisodeID: r.EpisodeID, TaskID: r.TaskID, Split: r.Split, Index: r.Index,
				Turns: r.Turns, Began: r.Began, Outcome: r.Outcome, Cause: r.Cause, Error: r.Error}
		}
		l.Sessions = append(l.Sessions, ls)
	}
	sort.Slice(l.Sessions, func(i, j int) bool {
		a, b := l.Sessions[i], l.Sessions[j]
		if !a.Opened.Equal(b.Opened) {
			return a.Opened.Before(b.Opened)
		}
		return a.ID < b.ID
	})
	l.Outcomes, l.Errors = s.metrics.counts()
	return l
}

// counts reads the episode outcome and error counters as /metrics serves
// them, summed over the labels the page does not show.
func (m *Metrics) counts() (outcomes map[string]map[string]float64, errs map[string]float64) {
	outcomes, errs = map[string]map[string]float64{}, map[string]float64{}
	collect(m.outcomes, func(labels map[string]string, v float64) {
		o := labels["outcome"]
		if outcomes[o] == nil {
			outcomes[o] = map[string]float64{}
		}
		outcomes[o][labels["cause"]] += v
	})
	collect(m.failures, func(labels map[string]string, v float64) { errs[labels["code"]] += v })
	return outcomes, errs
}

// collect calls each with the labels and value of every non-zero counter of c.
func collect(c prometheus.Collector, each func(labels map[string]string, v float64)) {
	ch := make(chan prometheus.Metric)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	for metric := range ch {
		var d dto.Metric
		if metric.Write(&d) != nil || d.GetCounter().GetValue() == 0 {
			continue
		}
		labels := make(map[string]string, len(d.GetLabel()))
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		each(labels, d.GetCounter().GetValue())
	}
}
