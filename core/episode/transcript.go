package episode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentenv/agentenv/sdk/toolformat"
)

// Transcript is what the model of an episode saw and wrote: kept only
// when Config.Transcripts is set (core/transcript makes records of it), so
// an engine without it spends nothing on it. It is bounded by the
// Limits' TranscriptTurnBytes and TranscriptBytes: what passes them is
// cut with a note, and turns past the episode's budget are only counted.
type Transcript struct {
	Prompt    []Message  // the opening messages (system, user)
	Tools     []Tool     // offered in the first turn
	Exchanges []Exchange // one per model reply kept, in order
	// TurnsOmitted counts the replies after Exchanges that were not kept:
	// the episode's transcript budget was spent.
	TurnsOmitted int
}

// Exchange is one model reply and what answered it.
type Exchange struct {
	Reply  string
	Parsed toolformat.Parsed // what the tool format read (its Content is not kept)
	// Messages are the messages answering the reply, as sent: tool
	// results bounded by the reply limits, errors, the next prompt.
	Messages []Message
	Took     time.Duration // the step's own time (its PhaseStep span)
}

// keepOpening records the opening of the first turn, when transcripts
// are kept.
func (ep *episode) keepOpening(obs *Observation) {
	if ep.transcript == nil {
		return
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.transcript.Prompt = append([]Message(nil), obs.Messages...)
	ep.transcript.Tools = obs.Tools
}

// keepExchange records one reply and its answer, when transcripts are
// kept. msgs is nil when the step failed: the reply is kept, unanswered.
// It keeps at most TranscriptTurnBytes of the turn's text and what is left
// of the episode's TranscriptBytes (counted JSON-encoded, as a record line
// holds them); a turn arriving with nothing left is only counted.
func (ep *episode) keepExchange(reply string, parsed toolformat.Parsed, msgs []Message, took time.Duration) {
	if ep.transcript == nil {
		return
	}
	if ep.transcriptLeft <= 0 {
		ep.mu.Lock()
		ep.transcript.TurnsOmitted++
		ep.mu.Unlock()
		return
	}
	l := ep.e.cfg.Limits
	b := &transcriptBudget{room: min(l.TranscriptTurnBytes, ep.transcriptLeft), limits: l}
	start := b.room
	x := Exchange{Reply: b.text(reply, "reply"), Took: took, Parsed: toolformat.Parsed{
		UnparsedOmitted: parsed.UnparsedOmitted, CallsOmitted: parsed.CallsOmitted}}
	if len(parsed.Unparsed) > 0 {
		x.Parsed.Unparsed = make([]toolformat.Unparsed, len(parsed.Unparsed))
		for i, u := range parsed.Unparsed { // bounded by the SDK; often slices of the reply
			x.Parsed.Unparsed[i] = toolformat.Unparsed{Text: strings.Clone(u.Text), Reason: strings.Clone(u.Reason)}
		}
	}
	if len(parsed.Calls) > 0 {
		x.Parsed.Calls = make([]toolformat.Call, len(parsed.Calls))
		for i, c := range parsed.Calls {
			// A name is often a slice of the reply: a copy lets the reply go.
			x.Parsed.Calls[i] = toolformat.Call{Name: strings.Clone(c.Name), Arguments: b.arguments(c.Arguments)}
		}
	}
	if msgs != nil {
		x.Messages = make([]Message, len(msgs))
		for i, m := range msgs {
			x.Messages[i] = Message{Role: m.Role, Content: b.text(m.Content, "message")}
		}
	}
	ep.transcriptLeft -= start - b.room
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.transcript.Exchanges = append(ep.transcript.Exchanges, x)
}

// transcriptBudget is the room left for one turn's text in a transcript.
type transcriptBudget struct {
	room   int64
	limits Limits
}

// text is s cut to the room left, with a note saying what was not kept;
// a copy, so a long reply or result is not held by the part kept.
func (b *transcriptBudget) text(s, what string) string {
	kept, more := clipEncoded(s, b.room)
	b.room -= encodedLen(kept)
	if more == 0 {
		return strings.Clone(s)
	}
	return kept + fmt.Sprintf("\n[agentenv: the transcript keeps %d bytes of a turn and %d of an episode; about %d more bytes of this %s were not kept]",
		b.limits.TranscriptTurnBytes, b.limits.TranscriptBytes, more, what)
}

// arguments are a call's arguments when they fit the room left, or a JSON
// string saying how many bytes were not kept.
func (b *transcriptBudget) arguments(args json.RawMessage) json.RawMessage {
	if n := int64(len(args)); n <= b.room {
		b.room -= n
		return bytes.Clone(args)
	}
	note, _ := json.Marshal(fmt.Sprintf("[agentenv: %d bytes of arguments were not kept in the transcript]", len(args)))
	return note
}

// transcriptCopy is a copy of the transcript's slice headers, for a
// Result; call with mu held.
func (ep *episode) transcriptCopyLocked() *Transcript {
	if ep.transcript == nil {
		return nil
	}
	t := *ep.transcript
	return &t
}
