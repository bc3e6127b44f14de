package episode

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/agentenv/agentenv/sdk/toolformat"
)

// Defaults of the reply limits, used where Limits leaves a field zero.
const (
	DefaultMaxReplyErrors    = 20
	DefaultMaxCallsPerReply  = 64
	DefaultMaxArgumentValues = 20_000

	// DefaultParseTimeout is far above what any real reply takes to read
	// (a 16 MiB hostile one takes about a second), and far below what a
	// parser's worst case held a step before there was one.
	DefaultParseTimeout = 10 * time.Second

	// A live episode's transcript (the /ui page, --record): a turn's text,
	// and the episode's, at most; a record line is about as long.
	DefaultTranscriptTurnBytes = 1 << 20
	DefaultTranscriptBytes     = 8 << 20

	DefaultMaxResultBytes      = 4 << 20
	DefaultMaxReplyResultBytes = 16 << 20
	// MaxReplyResultBytesCap is the most MaxReplyResultBytes may be: an
	// observation answering one reply then stays under ClientFrameLimit.
	MaxReplyResultBytesCap = 48 << 20
	// ClientFrameLimit is the WebSocket frame limit of the SkyRL client
	// (integrations/skyrl, _MAX_FRAME): an observation past it kills the
	// client's session (close code 1006) on every replay alike.
	ClientFrameLimit = 64 << 20
)

// SchemaErrorsShown is how many schema failures one call's error lists;
// the rest are counted.
const SchemaErrorsShown = 10

// MaxErrorChars clips one error message sent back to the model (a
// plugin's reason quoting a huge block, say).
const MaxErrorChars = 2000

// Limits bound what one model reply can make the engine do and send back,
// so a hostile or runaway reply costs bounded memory and time.
type Limits struct {
	// MaxReplyErrors caps the error messages answering one reply; the
	// rest are counted in one last message.
	MaxReplyErrors int
	// MaxCallsPerReply caps the tool calls run for one reply; later calls
	// are answered "not run".
	MaxCallsPerReply int
	// MaxArgumentValues caps the JSON values (keys included) in one call's
	// arguments; a larger call is refused before it is decoded or checked
	// against its schema.
	MaxArgumentValues int
	// MaxResultBytes caps what the engine reads of one tool call's answer
	// from the env; the rest is dropped as it streams in, and the model is
	// told its result was cut.
	MaxResultBytes int64
	// MaxReplyResultBytes caps the tool results answering one reply
	// together, counted as sent (JSON-encoded); later results are cut to
	// what is left. At most MaxReplyResultBytesCap.
	MaxReplyResultBytes int64
	// ParseTimeout is how long reading one reply's tool calls may take
	// (in process or through a plugin); past it the reply is answered as
	// one call that could not be read, and the parse is stopped.
	ParseTimeout time.Duration
	// TranscriptTurnBytes and TranscriptBytes bound what an episode keeps
	// for its transcript (Config.Transcripts): one turn's reply, call
	// arguments and answers together, and all its turns; past them text
	// is cut with a note, and later turns are only counted.
	TranscriptTurnBytes int64
	TranscriptBytes     int64
	// MaxTurns caps the model replies of every episode (0: no cap): a
	// reset's max_turns may lower it, not raise it. A turn's own
	// max_turns still ends its turn.
	MaxTurns int
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxReplyErrors, DefaultMaxReplyErrors)
	def(&l.MaxCallsPerReply, DefaultMaxCallsPerReply)
	def(&l.MaxArgumentValues, DefaultMaxArgumentValues)
	if l.MaxResultBytes <= 0 {
		l.MaxResultBytes = DefaultMaxResultBytes
	}
	if l.MaxReplyResultBytes <= 0 {
		l.MaxReplyResultBytes = DefaultMaxReplyResultBytes
	}
	if l.TranscriptTurnBytes <= 0 {
		l.TranscriptTurnBytes = DefaultTranscriptTurnBytes
	}
	if l.TranscriptBytes <= 0 {
		l.TranscriptBytes = DefaultTranscriptBytes
	}
	if l.ParseTimeout <= 0 {
		l.ParseTimeout = DefaultParseTimeout
	}
	return l
}

// check refuses limits a client could not be answered within.
func (l Limits) check() error {
	if l.MaxReplyResultBytes > MaxReplyResultBytesCap {
		return fmt.Errorf("the results of one reply may hold at most %d bytes (%d MiB) together, so an observation fits a client's %d MiB frame; %d is more",
			MaxReplyResultBytesCap, MaxReplyResultBytesCap>>20, ClientFrameLimit>>20, l.MaxReplyResultBytes)
	}
	return nil
}

// replyReport builds the tool messages answering one reply: every result,
// and errors up to the cap, then one line counting the errors left out.
type replyReport struct {
	obs     *Observation
	limits  Limits
	errors  int   // errors reported
	omitted int   // errors left out
	run     int   // calls admitted to run
	sent    int64 // bytes of tool results in the answer, JSON-encoded
}

func newReplyReport(obs *Observation, l Limits) *replyReport {
	return &replyReport{obs: obs, limits: l}
}

// result adds a tool message that is not an error.
func (r *replyReport) result(content string) {
	r.obs.Messages = append(r.obs.Messages, Message{Role: "tool", Content: content})
}

// resultRoom is what the next tool result may hold: its own cap, or what
// the reply has left.
func (r *replyReport) resultRoom() int64 {
	return max(min(r.limits.MaxResultBytes, r.limits.MaxReplyResultBytes-r.sent), 0)
}

// toolResult adds a call's result (prefix + text), cut to the room left;
// dropped is what the env client already left unread. A cut result ends
// with a line saying so, so the model learns to ask for less.
func (r *replyReport) toolResult(prefix, text string, dropped int64) {
	room := r.resultRoom()
	kept, more := clipEncoded(prefix+text, room)
	r.sent += encodedLen(kept)
	if more > 0 || dropped > 0 {
		kept += fmt.Sprintf("\n[agentenv: the tool's result was cut here: about %d more bytes were not shown. A tool's result may hold at most %d bytes, and the results answering one reply %d together; ask for less at a time.]",
			more+dropped, r.limits.MaxResultBytes, r.limits.MaxReplyResultBytes)
	}
	r.result(kept)
}

// fail adds an "Error: ..." tool message, or counts it once the cap is
// reached.
func (r *replyReport) fail(msg string) {
	if r.errors >= r.limits.MaxReplyErrors {
		r.omitted++
		return
	}
	r.errors++
	r.result("Error: " + clipError(msg, MaxErrorChars))
}

// omitParsed counts, as errors left out, what the tool-format plugin read
// but did not send (a flood of bad blocks; calls too large together) and
// returns how many calls that is.
func (r *replyReport) omitParsed(p toolformat.Parsed) int {
	n := p.UnparsedOmitted + p.CallsOmitted
	r.omitted += n
	return n
}

// admit says whether one more call may run in this reply.
func (r *replyReport) admit() bool {
	if r.run >= r.limits.MaxCallsPerReply {
		return false
	}
	r.run++
	return true
}

// notRun is the error for a call past MaxCallsPerReply.
func (r *replyReport) notRun(name string) string {
	return fmt.Sprintf("%s was not run: a reply may make at most %d tool calls; make the rest in your next reply.", name, r.limits.MaxCallsPerReply)
}

// finish adds the count of errors left out, if any.
func (r *replyReport) finish() {
	if r.omitted == 0 {
		return
	}
	r.result(fmt.Sprintf("Error: %d more tool calls in this reply failed (not listed: at most %d errors are shown per reply).", r.omitted, r.limits.MaxReplyErrors))
	r.omitted = 0
}

// clipError cuts s to at most n bytes on a rune boundary, saying how much was cut.
func clipError(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d more bytes)", s[:cut], len(s)-cut)
}

// checkArgumentSize refuses arguments with more than max JSON values
// before anything decodes them: decoding and checking a million-item
// array against a schema costs gigabytes.
func checkArgumentSize(args []byte, max int) error {
	if n := countJSONValues(args, max); n > max {
		return fmt.Errorf("the arguments hold more than %d JSON values (keys included), the most one call may have; send less per call", max)
	}
	return nil
}

// countJSONValues counts the values of JSON text: strings (keys too),
// numbers, literals, objects and arrays. It stops counting past limit. The
// text need not be valid; it only scans.
func countJSONValues(data []byte, limit int) int {
	n := 0
	inString, escaped, inToken := false, false, false
	for _, c := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch {
		case c == '"':
			inString, inToken = true, false
			n++
		case c == '{' || c == '[':
			inToken = false
			n++
		case c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
			if !inToken {
				inToken = true
				n++
			}
		default:
			inToken = false
		}
		if n > limit {
			return n
		}
	}
	return n
}

// checkCall checks a call's arguments: their size, then the tool's schema.
// It returns the arguments to send: the JSON text the model wrote.
func (l Limits) checkCall(o *offered, args json.RawMessage) (json.RawMessage, error) {
	if err := checkArgumentSize(args, l.MaxArgumentValues); err != nil {
		return nil, err
	}
	return o.validate(args)
}
