package cli

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/core/server"
)

// serveLimits bound what a client, hostile or runaway, can cost the
// server. Each is a flag, and so a key of the [serve] table (the flag
// name with '_' for '-'); docs/serving.md lists them.
type serveLimits struct {
	MaxReplyErrors    int
	MaxCallsPerReply  int
	MaxArgumentValues int
	// What an env's tool results may cost: per call, and per reply.
	MaxResultBytes      int
	MaxReplyResultBytes int
	ParseTimeout        time.Duration
	// What a live episode keeps for its transcript (/ui, --record).
	TranscriptTurnBytes int
	TranscriptBytes     int
	MaxTurns            int // 0: none
	HTTPReadTimeout     time.Duration
	HTTPWriteTimeout    time.Duration
	HTTPIdleTimeout     time.Duration
	MaxConnections      int
	MaxQueuedMessages   int
}

func defaultServeLimits() serveLimits {
	return serveLimits{
		MaxReplyErrors:      episode.DefaultMaxReplyErrors,
		MaxCallsPerReply:    episode.DefaultMaxCallsPerReply,
		MaxArgumentValues:   episode.DefaultMaxArgumentValues,
		MaxResultBytes:      episode.DefaultMaxResultBytes,
		MaxReplyResultBytes: episode.DefaultMaxReplyResultBytes,
		ParseTimeout:        episode.DefaultParseTimeout,
		TranscriptTurnBytes: episode.DefaultTranscriptTurnBytes,
		TranscriptBytes:     episode.DefaultTranscriptBytes,
		HTTPReadTimeout:     server.DefaultHTTPReadTimeout,
		HTTPWriteTimeout:    server.DefaultHTTPWriteTimeout,
		HTTPIdleTimeout:     server.DefaultHTTPIdleTimeout,
		MaxConnections:      server.DefaultMaxConnections,
		MaxQueuedMessages:   server.DefaultMaxQueuedFrames,
	}
}

// limitSetting is one limit: its flag name, help, and where it lives.
type limitSetting struct {
	flag string
	help string
	n    *int           // a count, at least 1
	zero bool           // or 0, for none
	d    *time.Duration // or a duration, more than 0
}

// settings lists l's limits, in the same order for any serveLimits.
func (l *serveLimits) settings() []limitSetting {
	return []limitSetting{
		{flag: "max-reply-errors", n: &l.MaxReplyErrors, help: "error messages one model reply gets back at most; the rest are counted in one line"},
		{flag: "max-calls-per-reply", n: &l.MaxCallsPerReply, help: "tool calls run for one model reply at most; later ones are answered \"not run\""},
		{flag: "max-argument-values", n: &l.MaxArgumentValues, help: "JSON values (keys included) one tool call's arguments may hold; larger calls are refused unread"},
		{flag: "max-result-bytes", n: &l.MaxResultBytes, help: "bytes of one tool call's result read from the env at most; the rest is dropped unread and the model told its result was cut"},
		{flag: "max-reply-result-bytes", n: &l.MaxReplyResultBytes, help: fmt.Sprintf("bytes of tool results (as sent) answering one model reply at most, together; at most %d (48 MiB), so an observation fits a client's 64 MiB frame", episode.MaxReplyResultBytesCap)},
		{flag: "parse-timeout", d: &l.ParseTimeout, help: "longest time reading one model reply's tool calls may take; past it the parse is stopped and the reply answered as unreadable"},
		{flag: "transcript-turn-bytes", n: &l.TranscriptTurnBytes, help: "bytes of one turn (reply, call arguments, answers) a live episode keeps for its transcript (/ui, --record); the rest is cut with a note"},
		{flag: "transcript-bytes", n: &l.TranscriptBytes, help: "bytes of all its turns a live episode keeps for its transcript (/ui, --record); later turns are counted, not kept"},
		{flag: "max-turns", n: &l.MaxTurns, zero: true, help: "model replies an episode may take at most before it is scored, for every task (0: no cap beyond the task's and the reset's); a reset's max_turns may lower it"},
		{flag: "http-read-timeout", d: &l.HTTPReadTimeout, help: "longest time to read one HTTP request, headers and body"},
		{flag: "http-write-timeout", d: &l.HTTPWriteTimeout, help: "longest time to handle one HTTP request and write its response"},
		{flag: "http-idle-timeout", d: &l.HTTPIdleTimeout, help: "close a kept-alive HTTP connection after this long without a request"},
		{flag: "max-connections", n: &l.MaxConnections, help: "open connections at most, WebSocket sessions included; past it a connection is answered 503"},
		{flag: "max-queued-messages", n: &l.MaxQueuedMessages, help: "messages a session holds waiting for their replies; past it one is answered QUEUE_FULL"},
	}
}

// addFlags registers every limit as a flag.
func (l *serveLimits) addFlags(f *pflag.FlagSet) {
	for _, s := range l.settings() {
		if s.n != nil {
			f.IntVar(s.n, s.flag, *s.n, s.help)
		} else {
			f.DurationVar(s.d, s.flag, *s.d, s.help)
		}
	}
}

// check refuses limits out of range, naming the flag.
func (l *serveLimits) check() error {
	for _, s := range l.settings() {
		switch {
		case s.n != nil && s.zero && *s.n < 0:
			return fmt.Errorf("--%s must be 0 (none) or more, got %d", s.flag, *s.n)
		case s.n != nil && !s.zero && *s.n < 1:
			return fmt.Errorf("--%s must be at least 1, got %d", s.flag, *s.n)
		case s.d != nil && *s.d <= 0:
			return fmt.Errorf("--%s must be more than 0, got %s", s.flag, *s.d)
		}
	}
	if l.MaxReplyResultBytes > episode.MaxReplyResultBytesCap {
		return fmt.Errorf("--max-reply-result-bytes %d: at most %d (48 MiB), so an observation fits the SkyRL client's 64 MiB frame", l.MaxReplyResultBytes, episode.MaxReplyResultBytesCap)
	}
	return nil
}

// episodeLimits are the limits the episode engine applies.
func (l serveLimits) episodeLimits() episode.Limits {
	return episode.Limits{
		MaxReplyErrors:      l.MaxReplyErrors,
		MaxCallsPerReply:    l.MaxCallsPerReply,
		MaxArgumentValues:   l.MaxArgumentValues,
		MaxResultBytes:      int64(l.MaxResultBytes),
		MaxReplyResultBytes: int64(l.MaxReplyResultBytes),
		ParseTimeout:        l.ParseTimeout,
		TranscriptTurnBytes: int64(l.TranscriptTurnBytes),
		TranscriptBytes:     int64(l.TranscriptBytes),
		MaxTurns:            l.MaxTurns,
	}
}

// httpLimits are the limits the HTTP server applies.
func (l serveLimits) httpLimits() server.HTTPLimits {
	return server.HTTPLimits{
		ReadTimeout:    l.HTTPReadTimeout,
		WriteTimeout:   l.HTTPWriteTimeout,
		IdleTimeout:    l.HTTPIdleTimeout,
		MaxConnections: l.MaxConnections,
	}
}
