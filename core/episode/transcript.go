package episode

import (
	"time"

	"github.com/agentenv/agentenv/sdk/toolformat"
)

// Transcript is what the model of an episode saw and wrote: kept only
// when Config.Transcripts is set (core/transcript makes records of it), so
// an engine without it spends nothing on it.
type Transcript struct {
	Prompt    []Message  // the opening messages (system, user)
	Tools     []Tool     // offered in the first turn
	Exchanges []Exchange // one per model reply, in order
}

// Exchange is one model reply and what answered it.
type Exchange struct {
	Reply  string
	Parsed toolformat.Parsed // what the tool format read
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
func (ep *episode) keepExchange(reply string, parsed toolformat.Parsed, msgs []Message, took time.Duration) {
	if ep.transcript == nil {
		return
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.transcript.Exchanges = append(ep.transcript.Exchanges, Exchange{Reply: reply, Parsed: parsed, Messages: msgs, Took: took})
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
