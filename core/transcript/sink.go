package transcript

import (
	"strings"
	"sync"
	"time"

	"github.com/agentenv/agentenv/core/episode"
)

// Sink takes ended episodes' records. Record is called from the engine's
// goroutines, many at once, and must not block: a Sink that does slow
// work (a disk) queues and drops when behind, as Writer does.
type Sink interface {
	Record(r *Record)
}

// Sinks hands each record to every sink in turn.
type Sinks []Sink

func (s Sinks) Record(r *Record) {
	for _, k := range s {
		k.Record(r)
	}
}

// Observer is the episode engine's observer that turns each ended
// episode into a Record for Sink. The engine captures the turns only when
// its Config.Transcripts is set; without it records carry no turns.
type Observer struct {
	Sink Sink
	// Bundle and Server are stamped on every record (Record.Bundle,
	// Record.Server).
	Bundle, Server string
}

var _ episode.Observer = Observer{}

// ObserveSpan does nothing: a record is made once the episode ended.
func (Observer) ObserveSpan(episode.Span) {}

// EpisodeEnded makes the episode's record and hands it to the sink.
func (o Observer) EpisodeEnded(r episode.Result) {
	if o.Sink != nil {
		rec := FromResult(r)
		rec.Bundle, rec.Server = o.Bundle, o.Server
		o.Sink.Record(rec)
	}
}

// FromResult is the record of an episode's final Result.
func FromResult(r episode.Result) *Record {
	rec := &Record{
		Format: Format, EpisodeID: r.EpisodeID, TaskID: r.TaskID,
		Split: r.Split, Index: r.Index, ToolFormat: r.ToolFormat, Sandbox: r.Sandbox,
		Prompt: []Message{}, Turns: []Turn{},
		Reward: r.Reward, Outcome: r.Outcome, Cause: r.Cause, Source: r.Source(), Error: r.Error,
		Times: r.Seconds(), Started: r.Began, Ended: r.Ended,
	}
	if rec.Ended.IsZero() {
		rec.Ended = time.Now()
	}
	for k, v := range r.Metrics {
		if id, ok := strings.CutPrefix(k, "score/"); ok {
			if rec.Scores == nil {
				rec.Scores = map[string]float64{}
			}
			rec.Scores[id] = v
			continue
		}
		if rec.Metrics == nil {
			rec.Metrics = map[string]float64{}
		}
		rec.Metrics[k] = v
	}
	t := r.Transcript
	if t == nil {
		return rec
	}
	rec.Prompt = append(rec.Prompt, t.Prompt...)
	for _, tool := range t.Tools {
		rec.Tools = append(rec.Tools, Tool{Name: tool.Name, Description: tool.Description, Parameters: tool.Parameters})
	}
	rec.Turns, rec.TurnsOmitted = make([]Turn, len(t.Exchanges)), t.TurnsOmitted
	for i, x := range t.Exchanges {
		turn := Turn{Reply: x.Reply, Messages: x.Messages, StepS: x.Took.Seconds(),
			UnparsedOmitted: x.Parsed.UnparsedOmitted, CallsOmitted: x.Parsed.CallsOmitted}
		if turn.Messages == nil {
			turn.Messages = []Message{}
		}
		for _, c := range x.Parsed.Calls {
			turn.Calls = append(turn.Calls, Call{Name: c.Name, Arguments: c.Arguments})
		}
		for _, u := range x.Parsed.Unparsed {
			turn.Unparsed = append(turn.Unparsed, Unparsed{Text: clip(u.Text, MaxUnparsedText), Reason: u.Reason})
		}
		rec.Turns[i] = turn
	}
	return rec
}

// clip cuts s to at most n bytes, on a UTF-8 boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// Recent keeps the last records in memory, newest first: what the /ui
// page lists. It holds at most its count of records and about its bytes
// of their text (the oldest go first; the newest always stays).
type Recent struct {
	mu       sync.Mutex
	max      int
	maxBytes int64
	ring     []*Record // oldest first
	sizes    []int64
	bytes    int64
	total    uint64
}

// Defaults of NewRecent.
const (
	DefaultRecent      = 200
	DefaultRecentBytes = 64 << 20
)

// NewRecent keeps up to n records (0: DefaultRecent) of about maxBytes
// together (0: DefaultRecentBytes).
func NewRecent(n int, maxBytes int64) *Recent {
	if n <= 0 {
		n = DefaultRecent
	}
	if maxBytes <= 0 {
		maxBytes = DefaultRecentBytes
	}
	return &Recent{max: n, maxBytes: maxBytes}
}

// Record keeps r, dropping the oldest past the bounds.
func (c *Recent) Record(r *Record) {
	size := r.Size()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total++
	c.ring = append(c.ring, r)
	c.sizes = append(c.sizes, size)
	c.bytes += size
	drop := 0
	for len(c.ring)-drop > 1 && (len(c.ring)-drop > c.max || c.bytes > c.maxBytes) {
		c.bytes -= c.sizes[drop]
		drop++
	}
	if drop > 0 {
		c.ring = append(c.ring[:0:0], c.ring[drop:]...)
		c.sizes = append(c.sizes[:0:0], c.sizes[drop:]...)
	}
}

// List is the records kept, newest first. The records are shared: read
// them, never change them.
func (c *Recent) List() []*Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Record, len(c.ring))
	for i, r := range c.ring {
		out[len(c.ring)-1-i] = r
	}
	return out
}

// Get is the kept record of an episode, newest first if an id repeats.
func (c *Recent) Get(episodeID string) (*Record, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.ring) - 1; i >= 0; i-- {
		if c.ring[i].EpisodeID == episodeID {
			return c.ring[i], true
		}
	}
	return nil, false
}

// Total is how many records Recent was given, kept or not: a page polls
// it to see whether anything changed.
func (c *Recent) Total() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Size is about how many bytes of text r holds: what Recent counts.
func (r *Record) Size() int64 {
	n := int64(512)
	for _, m := range r.Prompt {
		n += int64(len(m.Content)) + 16
	}
	for _, t := range r.Tools {
		n += int64(len(t.Name) + len(t.Description) + len(t.Parameters))
	}
	for _, t := range r.Turns {
		n += int64(len(t.Reply)) + 64
		for _, m := range t.Messages {
			n += int64(len(m.Content)) + 16
		}
		for _, c := range t.Calls {
			n += int64(len(c.Name) + len(c.Arguments))
		}
		for _, u := range t.Unparsed {
			n += int64(len(u.Text) + len(u.Reason))
		}
	}
	return n + int64(len(r.Error))
}
