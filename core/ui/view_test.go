package ui

import (
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/core/server"
	"github.com/agentenv/agentenv/core/transcript"
)

func TestHistogram(t *testing.T) {
	for _, tc := range []struct {
		name   string
		vs     []float64
		lo, hi float64
		counts []int
		n      int
	}{
		{"empty", nil, 0, 1, []int{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0},
		{"edges", []float64{0, 0.2, 0.2, 1}, 0, 1, []int{1, 0, 2, 0, 0, 0, 0, 0, 0, 1}, 4},
		{"just under an edge", []float64{0.0999, 0.1}, 0, 1, []int{1, 1, 0, 0, 0, 0, 0, 0, 0, 0}, 2},
		{"wider than [0, 1]", []float64{-1, 3}, -1, 3, []int{1, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 2},
		{"NaN and Inf left out", []float64{math.NaN(), math.Inf(1), 0.5}, 0, 1, []int{0, 0, 0, 0, 0, 1, 0, 0, 0, 0}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := histogram("reward", tc.vs)
			if h.Lo != tc.lo || h.Hi != tc.hi || !reflect.DeepEqual(h.Counts, tc.counts) || h.N != tc.n {
				t.Errorf("histogram(%v) = [%g, %g] %v n=%d, want [%g, %g] %v n=%d", tc.vs, h.Lo, h.Hi, h.Counts, h.N, tc.lo, tc.hi, tc.counts, tc.n)
			}
			if len(h.Bars) != histBins {
				t.Fatalf("%d bars", len(h.Bars))
			}
			for i, b := range h.Bars {
				if b.H < 0 || b.H > histH || b.Y+b.H != histH || (tc.counts[i] == 0) != (b.H == 0) {
					t.Errorf("bar %d = %+v for count %d", i, b, tc.counts[i])
				}
			}
		})
	}
}

func TestPercentiles(t *testing.T) {
	for _, tc := range []struct {
		vs                 []float64
		p50, p90, p99, max float64
	}{
		{[]float64{5}, 5, 5, 5, 5},
		{[]float64{4, 1, 3, 2}, 2, 4, 4, 4},
		{[]float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 5, 9, 10, 10},
	} {
		st := percentiles("deploy", tc.vs)
		if st.N != len(tc.vs) || st.P50 != tc.p50 || st.P90 != tc.p90 || st.P99 != tc.p99 || st.Max != tc.max {
			t.Errorf("percentiles(%v) = %+v, want p50 %g p90 %g p99 %g max %g", tc.vs, st, tc.p50, tc.p90, tc.p99, tc.max)
		}
	}
	if st := percentiles("x", nil); st.N != 0 || st.Max != 0 {
		t.Errorf("percentiles(nil) = %+v", st)
	}
}

// Failure causes land in the span of time they ended in; completed
// episodes are counted apart.
func TestCauseChart(t *testing.T) {
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	rec := func(cause episode.Cause, before time.Duration) *transcript.Record {
		return &transcript.Record{Cause: cause, Ended: now.Add(-before)}
	}
	c := causeChart(now, []*transcript.Record{
		rec(episode.CauseCompleted, 0),
		rec(episode.CauseDeployFailed, time.Second),
		rec(episode.CauseDeployFailed, 2*time.Second),
		rec(episode.CauseUnparsedCalls, 23*time.Minute),
		rec(episode.CauseClientClosed, 24*time.Minute), // the oldest: the chart's start
	})
	if !c.From.Equal(now.Add(-24*time.Minute)) || len(c.Buckets) != causeBuckets || c.Span != "1m00s" {
		t.Fatalf("chart from %s, %d buckets of %s", c.From, len(c.Buckets), c.Span)
	}
	want := map[string]int{"deploy_failed": 2, "unparsed_calls": 1, "client_closed": 1}
	if !reflect.DeepEqual(c.Totals, want) || c.Completed != 1 || c.Max != 2 {
		t.Errorf("totals %v completed %d max %d, want %v, 1, 2", c.Totals, c.Completed, c.Max, want)
	}
	if c.Buckets[0]["client_closed"] != 1 || c.Buckets[1]["unparsed_calls"] != 1 || c.Buckets[causeBuckets-1]["deploy_failed"] != 2 {
		t.Errorf("buckets %v", c.Buckets)
	}
	legend := c.legend()
	var order []string
	for _, l := range legend {
		order = append(order, l.Cause+"/"+l.Source)
	}
	if wantOrder := []string{"unparsed_calls/model", "deploy_failed/infrastructure", "client_closed/client"}; !reflect.DeepEqual(order, wantOrder) {
		t.Errorf("legend %v, want %v", order, wantOrder)
	}
	if empty := causeChart(now, nil); empty.Totals == nil || len(empty.Bars) != 0 {
		t.Errorf("empty chart %+v", empty)
	}
}

func TestSeconds(t *testing.T) {
	for s, want := range map[float64]string{0: "0", 0.0004: "400µs", 0.25: "250ms", 2.46: "2.5s", 125: "2m05s", 7300: "2h01m"} {
		if got := seconds(s); got != want {
			t.Errorf("seconds(%g) = %q, want %q", s, got, want)
		}
	}
}

// A server with thousands of sessions lists those waiting first, then
// those playing, up to MaxSessionRows, and says how many it left out.
func TestSessionRows(t *testing.T) {
	now := time.Now()
	var live server.Live
	for i := range MaxSessionRows + 20 {
		live.Sessions = append(live.Sessions, server.LiveSession{ID: fmt.Sprint("idle-", i), Opened: now})
	}
	live.Sessions = append(live.Sessions,
		server.LiveSession{ID: "playing", Opened: now, Episode: &server.LiveEpisode{EpisodeID: "ep-1", Began: now}},
		server.LiveSession{ID: "waiting", Opened: now, WaitingSince: &now})
	s := buildSnapshot(now, live, nil, 0)
	if len(s.Sessions) != MaxSessionRows || s.MoreSess != 22 || s.Sessions[0].ID != "waiting" || s.Sessions[1].ID != "playing" {
		t.Errorf("%d rows (first %+v, %+v), %d more; want %d, waiting then playing first, 22 more",
			len(s.Sessions), s.Sessions[0], s.Sessions[1], s.MoreSess, MaxSessionRows)
	}
}
