package server

import (
	"fmt"
	"sync"
)

// DefaultMaxQueuedFrames is Options.MaxQueuedFrames when left zero.
const DefaultMaxQueuedFrames = 16

// CodeQueueFull answers a frame sent while MaxQueuedFrames frames (or
// MaxMessageBytes of them) were already waiting for their replies.
const CodeQueueFull = "QUEUE_FULL"

// inbox holds the frames a session has read but not yet handled. The
// reader never waits on it, so it keeps reading, and answering pings,
// while a long step runs with frames queued behind it. It is bounded:
// past maxFrames or maxBytes a frame is dropped, and a marker in its place
// makes the session answer it QUEUE_FULL in its turn.
type inbox struct {
	maxFrames int
	maxBytes  int64

	mu     sync.Mutex
	frames []frame
	bytes  int64
	ready  chan struct{} // signalled when a frame is added
}

func newInbox(maxFrames int, maxBytes int64) *inbox {
	return &inbox{maxFrames: maxFrames, maxBytes: maxBytes, ready: make(chan struct{}, 1)}
}

// push queues f, or a marker for it when the inbox is full. It never blocks.
func (in *inbox) push(f frame) {
	in.mu.Lock()
	if len(in.frames) >= in.maxFrames || in.bytes+int64(len(f.data)) > in.maxBytes {
		// Consecutive refusals share one marker, so a flood costs nothing.
		if n := len(in.frames); n > 0 && in.frames[n-1].refused > 0 {
			in.frames[n-1].refused++
		} else {
			in.frames = append(in.frames, frame{refused: 1})
		}
	} else {
		in.frames = append(in.frames, f)
		in.bytes += int64(len(f.data))
	}
	in.mu.Unlock()
	select {
	case in.ready <- struct{}{}:
	default:
	}
}

// pop takes the oldest frame; ok is false when there is none.
func (in *inbox) pop() (f frame, ok bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.frames) == 0 {
		return frame{}, false
	}
	f = in.frames[0]
	in.frames[0] = frame{} // let the data go
	in.frames = in.frames[1:]
	in.bytes -= int64(len(f.data))
	if len(in.frames) == 0 {
		in.frames = nil // drop the backing array
	}
	return f, true
}

// handleQueued handles the queued frames in order; false ends the session.
// It stops early when the session's context ends, leaving that to run.
func (s *session) handleQueued() bool {
	for s.ctx.Err() == nil {
		f, ok := s.inbox.pop()
		if !ok {
			return true
		}
		if f.refused > 0 {
			s.refuseQueued(f.refused)
			continue
		}
		if !s.handle(f) {
			return false
		}
	}
	return true
}

// refuseQueued answers n frames dropped from a full inbox, one error each.
func (s *session) refuseQueued(n int) {
	for range n {
		if s.ctx.Err() != nil {
			return
		}
		s.sendError(&wireError{Code: CodeQueueFull, Message: fmt.Sprintf(
			"message dropped: the queue of messages waiting for their replies was full (at most %d messages and %d bytes); wait for each reply before sending more",
			s.inbox.maxFrames, s.inbox.maxBytes)})
	}
}
