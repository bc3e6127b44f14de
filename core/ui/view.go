package ui

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/core/server"
	"github.com/agentenv/agentenv/core/transcript"
)

// Snapshot is what the page shows, as /ui/data.json serves it: the
// server's live state and summaries of the last episodes ended.
type Snapshot struct {
	Now  time.Time   `json:"now"`
	Live server.Live `json:"live"`
	// Window is how many of the last episodes the summaries cover; Ended
	// how many ended since the server started.
	Window int    `json:"window"`
	Ended  uint64 `json:"ended"`
	// Episodes are the last episodes, newest first (at most MaxRows).
	Episodes []EpisodeRow  `json:"episodes"`
	Splits   []SplitStats  `json:"splits"`
	Causes   CauseChart    `json:"causes"`
	Phases   []PhaseStats  `json:"phases"`
	Sessions []SessionRow  `json:"-"` // Live.Sessions, for the table (at most MaxSessionRows)
	MoreSess int           `json:"-"` // sessions left out of the table
	Totals   []OutcomeRow  `json:"-"` // Live.Outcomes, for the table
	Errors   []CountRow    `json:"-"` // Live.Errors, for the table
	Shown    int           `json:"-"` // len(Episodes)
	Legend   []CauseLegend `json:"-"`
}

// MaxRows caps the episodes listed; the summaries cover the whole window.
const MaxRows = 50

// MaxSessionRows caps the sessions listed (a server may hold thousands):
// those waiting for a slot first, then those playing, then the idle.
const MaxSessionRows = 100

// EpisodeRow is one ended episode in the list.
type EpisodeRow struct {
	EpisodeID string   `json:"episode_id"`
	TaskID    string   `json:"task_id"`
	Split     string   `json:"split,omitempty"`
	Index     *int     `json:"index,omitempty"`
	Outcome   string   `json:"outcome"`
	Cause     string   `json:"cause"`
	Reward    *float64 `json:"reward"`
	Turns     int      `json:"turns"`
	ToolCalls float64  `json:"tool_calls"`
	Unparsed  float64  `json:"unparsed_calls"`
	// Seconds is the episode's time, every phase but tool (part of step).
	Seconds float64   `json:"seconds"`
	Ended   time.Time `json:"ended"`
	Ago     string    `json:"-"`
}

// SessionRow is one open session.
type SessionRow struct {
	ID, Remote, Age, State string
	EpisodeID, TaskID      string
	Turns                  int
	Playing                string // the episode's time so far
}

// OutcomeRow counts episodes of one outcome and cause since start.
type OutcomeRow struct {
	Outcome, Cause string
	Count          float64
}

// CountRow is one counter.
type CountRow struct {
	Name  string
	Count float64
}

// SplitStats summarize one split's episodes in the window: its rewards and
// each verifier's scores.
type SplitStats struct {
	Split    string      `json:"split"` // "" for episodes reset by task id
	Episodes int         `json:"episodes"`
	Reward   Histogram   `json:"reward"`
	Scores   []Histogram `json:"scores"`
}

// Histogram counts values in equal bins over [Lo, Hi].
type Histogram struct {
	Name   string  `json:"name"`
	Lo     float64 `json:"lo"`
	Hi     float64 `json:"hi"`
	Counts []int   `json:"counts"`
	N      int     `json:"n"`
	Mean   float64 `json:"mean"`
	Bars   []Bar   `json:"-"`
}

// Bar is one drawn bar (an SVG rect) with what its tooltip says.
type Bar struct {
	X, Y, W, H float64
	Class      string
	Title      string
	Count      int
}

// CauseChart counts the episodes that did not complete, by cause, in equal
// spans of time over the window.
type CauseChart struct {
	From      time.Time        `json:"from"`
	To        time.Time        `json:"to"`
	Buckets   []map[string]int `json:"buckets"`
	Totals    map[string]int   `json:"totals"`
	Completed int              `json:"completed"`
	Bars      []Bar            `json:"-"`
	Span      string           `json:"-"`
	Max       int              `json:"-"`
}

// CauseLegend is one cause in the chart's legend.
type CauseLegend struct {
	Cause, Source, Class string
	Count                int
}

// PhaseStats are percentiles of one phase's time per episode (or per
// reply, for "reply") over the window.
type PhaseStats struct {
	Phase string  `json:"phase"`
	N     int     `json:"n"`
	P50   float64 `json:"p50_s"`
	P90   float64 `json:"p90_s"`
	P99   float64 `json:"p99_s"`
	Max   float64 `json:"max_s"`
}

// Chart geometry, in SVG user units.
const (
	histW, histH   = 240.0, 64.0
	histBins       = 10
	causeW, causeH = 720.0, 96.0
	causeBuckets   = 24
)

// buildSnapshot summarizes the live state and the window's records
// (newest first).
func buildSnapshot(now time.Time, live server.Live, recs []*transcript.Record, ended uint64) Snapshot {
	s := Snapshot{Now: now, Live: live, Window: len(recs), Ended: ended}
	for i, r := range recs {
		if i == MaxRows {
			break
		}
		s.Episodes = append(s.Episodes, episodeRow(now, r))
	}
	s.Shown = len(s.Episodes)
	s.Splits = splitStats(recs)
	s.Causes = causeChart(now, recs)
	s.Legend = s.Causes.legend()
	s.Phases = phaseStats(recs)
	sessions := append([]server.LiveSession(nil), live.Sessions...)
	busy := func(ls server.LiveSession) int {
		switch {
		case ls.WaitingSince != nil:
			return 0
		case ls.Episode != nil:
			return 1
		}
		return 2
	}
	sort.SliceStable(sessions, func(i, j int) bool { return busy(sessions[i]) < busy(sessions[j]) })
	for i, ls := range sessions {
		if i == MaxSessionRows {
			s.MoreSess = len(sessions) - i
			break
		}
		s.Sessions = append(s.Sessions, sessionRow(now, ls))
	}
	for outcome, causes := range live.Outcomes {
		for cause, n := range causes {
			s.Totals = append(s.Totals, OutcomeRow{Outcome: outcome, Cause: cause, Count: n})
		}
	}
	sort.Slice(s.Totals, func(i, j int) bool {
		a, b := s.Totals[i], s.Totals[j]
		if a.Outcome != b.Outcome {
			return a.Outcome < b.Outcome
		}
		return a.Cause < b.Cause
	})
	for code, n := range live.Errors {
		s.Errors = append(s.Errors, CountRow{Name: code, Count: n})
	}
	sort.Slice(s.Errors, func(i, j int) bool { return s.Errors[i].Name < s.Errors[j].Name })
	return s
}

func episodeRow(now time.Time, r *transcript.Record) EpisodeRow {
	row := EpisodeRow{
		EpisodeID: r.EpisodeID, TaskID: r.TaskID, Split: r.Split, Index: r.Index,
		Outcome: string(r.Outcome), Cause: string(r.Cause), Reward: r.Reward,
		Turns: len(r.Turns), ToolCalls: r.Metrics["tool_calls"], Unparsed: r.Metrics["unparsed_calls"],
		Ended: r.Ended, Ago: ago(now.Sub(r.Ended)),
	}
	if n, ok := r.Metrics["turns"]; ok && len(r.Turns) == 0 {
		row.Turns = int(n)
	}
	for phase, secs := range r.Times {
		if phase != string(episode.PhaseTool) {
			row.Seconds += secs
		}
	}
	return row
}

func sessionRow(now time.Time, ls server.LiveSession) SessionRow {
	row := SessionRow{ID: ls.ID, Remote: ls.Remote, Age: ago(now.Sub(ls.Opened)), State: "idle"}
	if ep := ls.Episode; ep != nil {
		row.State, row.EpisodeID, row.TaskID, row.Turns = "playing", ep.EpisodeID, ep.TaskID, ep.Turns
		if !ep.Began.IsZero() {
			row.Playing = seconds(now.Sub(ep.Began).Seconds())
		}
		if ep.Outcome != "" {
			row.State = string(ep.Outcome) + ", tearing down"
		}
	}
	if ls.WaitingSince != nil {
		row.State = "waiting for a slot " + seconds(now.Sub(*ls.WaitingSince).Seconds())
	}
	return row
}

// splitStats groups the records by split, in name order.
func splitStats(recs []*transcript.Record) []SplitStats {
	type acc struct {
		n       int
		rewards []float64
		scores  map[string][]float64
	}
	by := map[string]*acc{}
	for _, r := range recs {
		a := by[r.Split]
		if a == nil {
			a = &acc{scores: map[string][]float64{}}
			by[r.Split] = a
		}
		a.n++
		if r.Reward != nil {
			a.rewards = append(a.rewards, *r.Reward)
		}
		for id, v := range r.Scores {
			a.scores[id] = append(a.scores[id], v)
		}
	}
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]SplitStats, 0, len(names))
	for _, name := range names {
		a := by[name]
		st := SplitStats{Split: name, Episodes: a.n, Reward: histogram("reward", a.rewards)}
		ids := make([]string, 0, len(a.scores))
		for id := range a.scores {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			st.Scores = append(st.Scores, histogram("score/"+id, a.scores[id]))
		}
		out = append(out, st)
	}
	return out
}

// histogram bins vs over [min(0, lowest), max(1, highest)]: rewards and
// scores mostly live in [0, 1], and a fixed range keeps splits comparable.
func histogram(name string, vs []float64) Histogram {
	h := Histogram{Name: name, Lo: 0, Hi: 1, Counts: make([]int, histBins)}
	var sum float64
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		h.Lo, h.Hi = math.Min(h.Lo, v), math.Max(h.Hi, v)
		sum += v
		h.N++
	}
	if h.N > 0 {
		h.Mean = sum / float64(h.N)
	}
	width := (h.Hi - h.Lo) / histBins
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		i := int((v - h.Lo) / width)
		if i >= histBins {
			i = histBins - 1 // the top edge belongs to the last bin
		}
		h.Counts[i]++
	}
	peak := 0
	for _, c := range h.Counts {
		peak = max(peak, c)
	}
	bw := histW / histBins
	for i, c := range h.Counts {
		lo := h.Lo + float64(i)*width
		bar := Bar{X: float64(i) * bw, W: bw - 1, Count: c, Title: fmt.Sprintf("%s in [%.3g, %.3g): %d", name, lo, lo+width, c)}
		if i == histBins-1 {
			bar.Title = fmt.Sprintf("%s in [%.3g, %.3g]: %d", name, lo, h.Hi, c)
		}
		if peak > 0 {
			bar.H = histH * float64(c) / float64(peak)
		}
		bar.Y = histH - bar.H
		h.Bars = append(h.Bars, bar)
	}
	return h
}

// causeChart counts the causes of episodes that did not complete in
// causeBuckets equal spans from the window's oldest end to now.
func causeChart(now time.Time, recs []*transcript.Record) CauseChart {
	c := CauseChart{To: now, Totals: map[string]int{}}
	if len(recs) == 0 {
		return c
	}
	c.From = now
	for _, r := range recs {
		if r.Ended.Before(c.From) {
			c.From = r.Ended
		}
	}
	span := now.Sub(c.From)
	if span < time.Minute {
		span = time.Minute // a fresh server's chart still spans a minute
		c.From = now.Add(-span)
	}
	step := span / causeBuckets
	c.Span = seconds(step.Seconds())
	c.Buckets = make([]map[string]int, causeBuckets)
	for i := range c.Buckets {
		c.Buckets[i] = map[string]int{}
	}
	for _, r := range recs {
		if r.Cause == episode.CauseCompleted {
			c.Completed++
			continue
		}
		i := int(r.Ended.Sub(c.From) / step)
		i = min(max(i, 0), causeBuckets-1)
		c.Buckets[i][string(r.Cause)]++
		c.Totals[string(r.Cause)]++
	}
	for _, b := range c.Buckets {
		n := 0
		for _, v := range b {
			n += v
		}
		c.Max = max(c.Max, n)
	}
	bw := causeW / causeBuckets
	for i, b := range c.Buckets {
		y := causeH
		from := c.From.Add(time.Duration(i) * step)
		for _, cause := range orderedCauses(b) {
			h := causeH * float64(b[cause]) / float64(max(c.Max, 1))
			y -= h
			c.Bars = append(c.Bars, Bar{X: float64(i) * bw, Y: y, W: bw - 1, H: h, Class: causeClass(cause),
				Title: fmt.Sprintf("%s: %d, %s to %s", cause, b[cause], from.Format("15:04:05"), from.Add(step).Format("15:04:05"))})
		}
	}
	return c
}

// orderedCauses are a bucket's causes in episode.Causes' order, then any
// other, by name.
func orderedCauses(b map[string]int) []string {
	var out []string
	known := map[string]bool{}
	for _, c := range episode.Causes {
		known[string(c)] = true
		if b[string(c)] > 0 {
			out = append(out, string(c))
		}
	}
	var other []string
	for c, n := range b {
		if !known[c] && n > 0 {
			other = append(other, c)
		}
	}
	sort.Strings(other)
	return append(out, other...)
}

func (c CauseChart) legend() []CauseLegend {
	var out []CauseLegend
	for _, cause := range orderedCauses(c.Totals) {
		out = append(out, CauseLegend{Cause: cause, Source: string(episode.SourceOf(episode.Cause(cause))),
			Class: causeClass(cause), Count: c.Totals[cause]})
	}
	return out
}

// causeClass is the CSS class that colours a cause: its source's.
func causeClass(cause string) string {
	return "src-" + string(episode.SourceOf(episode.Cause(cause)))
}

// phaseStats are each phase's percentiles over the window's episodes (the
// time an episode spent in it), then each reply's step time.
func phaseStats(recs []*transcript.Record) []PhaseStats {
	out := make([]PhaseStats, 0, len(episode.Phases)+1)
	for _, p := range episode.Phases {
		var vs []float64
		for _, r := range recs {
			if v, ok := r.Times[string(p)]; ok {
				vs = append(vs, v)
			}
		}
		out = append(out, percentiles(string(p), vs))
	}
	var replies []float64
	for _, r := range recs {
		for _, t := range r.Turns {
			replies = append(replies, t.StepS)
		}
	}
	return append(out, percentiles("reply", replies))
}

// percentiles are nearest-rank percentiles of vs.
func percentiles(name string, vs []float64) PhaseStats {
	st := PhaseStats{Phase: name, N: len(vs)}
	if len(vs) == 0 {
		return st
	}
	sorted := append([]float64(nil), vs...)
	sort.Float64s(sorted)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
		return sorted[min(max(i, 0), len(sorted)-1)]
	}
	st.P50, st.P90, st.P99, st.Max = rank(50), rank(90), rank(99), sorted[len(sorted)-1]
	return st
}

// seconds writes a duration in seconds for people: 850ms, 2.4s, 3m05s.
func seconds(s float64) string {
	switch {
	case s == 0:
		return "0"
	case s < 0.001:
		return fmt.Sprintf("%.0fµs", s*1e6)
	case s < 1:
		return fmt.Sprintf("%.0fms", s*1e3)
	case s < 60:
		return fmt.Sprintf("%.1fs", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", int(s)/60, int(s)%60)
	}
	return fmt.Sprintf("%dh%02dm", int(s)/3600, int(s)%3600/60)
}

// ago writes how long ago d was.
func ago(d time.Duration) string {
	if d < time.Second {
		return "just now"
	}
	return seconds(math.Floor(d.Seconds())) + " ago"
}
