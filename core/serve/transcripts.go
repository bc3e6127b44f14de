package serve

import (
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/core/server"
	"github.com/agentenv/agentenv/core/transcript"
)

// Transcripts say where the records of ended episodes go. Run always
// keeps the last ones in memory for the live page (a Recent of its own
// when none is given), so the engine keeps every episode's turns; Dir
// adds the files.
type Transcripts struct {
	// Dir, when set, gets each record as a JSON line in daily files
	// (serve --record; transcript.Writer), rotated past MaxFileBytes,
	// through a queue of Queue records (0s: the writer's defaults). A Dir
	// that cannot be written stops Run before anything starts.
	Dir          string
	MaxFileBytes int64
	Queue        int
	// Recent, when set, keeps the last records in memory; Run hands it to
	// the live page (ui.Options.Recent), which shows them.
	Recent *transcript.Recent
}

// on says whether any record is wanted.
func (t Transcripts) on() bool { return t.Dir != "" || t.Recent != nil }

// open starts the sinks of t and returns the observer that hands each
// ended episode's record to them (nil: none wanted, and the engine need
// not keep turns); the writer's metrics join metrics. close writes what is
// queued; call it once the engine is closed.
func (t Transcripts) open(metrics *server.Metrics, bundle, serverID string, log hclog.Logger) (obs episode.Observer, close func(), err error) {
	if !t.on() {
		return nil, func() {}, nil
	}
	var sinks transcript.Sinks
	close = func() {}
	if t.Dir != "" {
		w, err := transcript.NewWriter(transcript.WriterOptions{Dir: t.Dir, MaxFileBytes: t.MaxFileBytes, Queue: t.Queue, Logger: log.Named("transcripts")})
		if err != nil {
			return nil, nil, err
		}
		if err := metrics.Register(w.Collectors()...); err != nil {
			_ = w.Close()
			return nil, nil, fmt.Errorf("transcripts: %w", err)
		}
		sinks = append(sinks, w)
		close = func() { _ = w.Close() } // a failure is logged by the writer
		log.Info("recording transcripts", "dir", t.Dir)
	}
	if t.Recent != nil {
		sinks = append(sinks, t.Recent)
	}
	return transcript.Observer{Sink: sinks, Bundle: bundle, Server: serverID}, close, nil
}
