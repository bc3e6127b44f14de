package serve

import (
	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/core/runtime"
	"github.com/agentenv/agentenv/core/server"
	"github.com/agentenv/agentenv/core/transcript"
)

// Transcripts say where the records of ended episodes go. With neither
// set the engine keeps no transcripts: a step costs nothing more.
type Transcripts struct {
	// Recent, when set, keeps the last records in memory; Run hands it to
	// the server (server.Options.Recent) for the pages that show them.
	Recent *transcript.Recent
}

// on says whether any record is wanted.
func (t Transcripts) on() bool { return t.Recent != nil }

// wire makes the engine keep transcripts and hands each ended episode's
// record to the sinks of t, beside the observer already set.
func (t Transcripts) wire(ro *runtime.Options, so *server.Options) {
	if !t.on() {
		return
	}
	var sinks transcript.Sinks
	if t.Recent != nil {
		sinks = append(sinks, t.Recent)
		so.Recent = t.Recent
	}
	ro.Transcripts = true
	ro.Observer = episode.Observers{ro.Observer, transcript.Observer{Sink: sinks}}
}
