package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of WriterOptions.
const (
	DefaultMaxFileBytes = 256 << 20
	DefaultQueue        = 1024
)

// WriterOptions say where a Writer writes and how much it holds.
type WriterOptions struct {
	// Dir gets the files: DIR/2026-12-02.jsonl, then DIR/2026-12-02.1.jsonl
	// and on once a day's file is full. It is made if missing.
	Dir string
	// MaxFileBytes starts the next file of the day once a file would pass
	// it (0: DefaultMaxFileBytes). A record larger than it gets a file of
	// its own.
	MaxFileBytes int64
	// Queue is how many records may wait to be written (0: DefaultQueue);
	// past it a record is dropped and counted, so a step never waits on
	// the disk.
	Queue  int
	Logger hclog.Logger
}

// Writer appends each record as one JSON line to the day's file, from a
// goroutine of its own. A write that fails (the disk is full) stops the
// recording: one error is logged, the line's partial bytes are cut off,
// and later records are counted as failed. It never stops the server.
type Writer struct {
	o    WriterOptions
	log  hclog.Logger
	lock *os.File // holds the directory's writer lock (lockDir) until Close

	mu     sync.RWMutex // Record holds it to send; Close to close queue
	closed bool
	queue  chan *Record
	done   chan struct{}

	// Touched only by the writing goroutine.
	f     *os.File
	day   string // of f
	seq   int    // of f: 0 for DAY.jsonl, n for DAY.n.jsonl
	size  int64  // of f
	enc   lineEncoder
	fault error // the write that stopped the recording

	stopped   atomic.Bool
	recorded  prometheus.Counter
	dropped   prometheus.Counter
	failed    prometheus.Counter
	recording prometheus.Gauge
}

// NewWriter checks that dir can be written (making it if missing) and
// starts the writer. An unwritable dir is an error naming it, so a server
// refuses to start rather than serve without the records it was asked
// for.
func NewWriter(o WriterOptions) (*Writer, error) {
	if o.Dir == "" {
		return nil, errors.New("transcripts: no directory given")
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = DefaultMaxFileBytes
	}
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if err := checkWritable(o.Dir); err != nil {
		return nil, err
	}
	lock, err := lockDir(o.Dir)
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	w := &Writer{
		o: o, log: log, lock: lock, queue: make(chan *Record, o.Queue), done: make(chan struct{}),
		recorded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentenv_transcripts_recorded_total", Help: "Episode transcripts written to the --record directory.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentenv_transcripts_dropped_total", Help: "Episode transcripts dropped because the write queue was full (--record-queue).",
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentenv_transcripts_failed_total", Help: "Episode transcripts not written because a write failed (the disk is full); recording stopped at the first.",
		}),
		recording: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentenv_transcripts_recording", Help: "1 while transcripts are being written to the --record directory, 0 once a failed write stopped it.",
		}),
	}
	w.recording.Set(1)
	go w.run()
	return w, nil
}

// DirError is a transcript directory that cannot be written.
type DirError struct {
	Dir    string
	Reason string // "cannot be made", "is not writable"
	Err    error
	// InUse: another server writes there (its lock is held); the
	// directory itself is fine.
	InUse bool
}

func (e *DirError) Error() string {
	return fmt.Sprintf("transcript directory %s %s: %v", e.Dir, e.Reason, e.Err)
}
func (e *DirError) Unwrap() error { return e.Err }

// lockFile is the file in a transcript directory whose lock its writer
// holds, with the writer's pid in it.
const lockFile = ".agentenv-writer.lock"

// lockDir takes the directory's writer lock: two servers appending to one
// day's file would interleave and rotate it under each other. The lock is
// the kernel's (flock), so it goes with a writer that dies.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, &DirError{Dir: dir, Reason: "is not writable", Err: err}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		held, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := "another agentenv serve"
			if pid := strings.TrimSpace(string(held)); pid != "" { // empty while its holder writes it
				who += " (pid " + pid + ")"
			}
			return nil, &DirError{Dir: dir, Reason: "is in use by " + who, InUse: true,
				Err: errors.New("each server needs a --record directory of its own (agentenv transcripts reads several at once)")}
		}
		return nil, &DirError{Dir: dir, Reason: "cannot be locked", Err: err}
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// checkWritable makes dir if missing and writes a probe file in it.
func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return &DirError{Dir: dir, Reason: "cannot be made", Err: err}
	}
	f, err := os.CreateTemp(dir, ".agentenv-probe-*")
	if err != nil {
		return &DirError{Dir: dir, Reason: "is not writable", Err: err}
	}
	name := f.Name()
	_, err = f.Write([]byte("probe\n"))
	err = errors.Join(err, f.Close(), os.Remove(name))
	if err != nil {
		return &DirError{Dir: dir, Reason: "is not writable", Err: err}
	}
	return nil
}

// Collectors are the writer's Prometheus series, for the server's
// registry.
func (w *Writer) Collectors() []prometheus.Collector {
	return []prometheus.Collector{w.recorded, w.dropped, w.failed, w.recording}
}

// Record queues r for writing, or drops and counts it when the queue is
// full or the writer closed. It never blocks.
func (w *Writer) Record(r *Record) {
	if w.stopped.Load() {
		w.failed.Inc()
		return
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		w.dropped.Inc()
		return
	}
	select {
	case w.queue <- r:
	default:
		w.dropped.Inc()
	}
}

// Close writes what is queued, syncs and closes the file. Records given
// after Close are dropped.
func (w *Writer) Close() error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	<-w.done
	if w.lock != nil {
		_ = w.lock.Close() // releases the directory's lock
		w.lock = nil
	}
	return w.fault
}

func (w *Writer) run() {
	defer close(w.done)
	for r := range w.queue {
		if w.fault != nil {
			w.failed.Inc()
			continue
		}
		if err := w.write(r); err != nil {
			w.fault = err
			w.stopped.Store(true)
			w.recording.Set(0)
			w.failed.Inc()
			w.log.Error("transcripts: a write failed; recording stopped (the server goes on; restart it to record again)",
				"dir", w.o.Dir, "error", err)
		} else {
			w.recorded.Inc()
		}
	}
	if w.f != nil {
		err := syncClose(w.f)
		if err != nil && w.fault == nil {
			w.fault = fmt.Errorf("transcripts: closing %s: %w", w.f.Name(), err)
			w.log.Error("transcripts: closing the file failed", "error", err)
		}
	}
}

// write appends r as one line, to a new file when the day changed or the
// file would grow past its size. The line is encoded a turn at a time
// straight to the file, so writing a record costs one turn's JSON, not
// the line's. A failed write cuts the line's partial bytes off, so the
// file holds whole lines only.
func (w *Writer) write(r *Record) error {
	day := r.Ended.UTC().Format(time.DateOnly)
	need, err := lineSize(r) // rotation needs it first
	if err != nil {
		return err
	}
	if w.f == nil || day != w.day || (w.size > 0 && w.size+need > w.o.MaxFileBytes) {
		if err := w.next(day, need); err != nil {
			return err
		}
	}
	cw := &countingWriter{w: w.f}
	if err = w.enc.writeLine(cw, r); err != nil {
		if cw.n > 0 {
			err = errors.Join(err, w.f.Truncate(w.size))
		}
		return fmt.Errorf("writing the record of %s to %s: %w", r.EpisodeID, w.f.Name(), err)
	}
	w.size += cw.n
	return nil
}

// lineSize is the length of r's line, measured by encoding it to nowhere
// a turn at a time (the CPU of a second encoding, not the memory of the
// line).
func lineSize(r *Record) (int64, error) {
	cw := &countingWriter{w: io.Discard}
	enc := json.NewEncoder(cw)
	enc.SetEscapeHTML(false)
	head := *r
	head.Turns = []Turn{}
	if err := enc.Encode(&head); err != nil {
		return 0, fmt.Errorf("encoding the record of %s: %w", r.EpisodeID, err)
	}
	for i := range r.Turns {
		if err := enc.Encode(&r.Turns[i]); err != nil {
			return 0, fmt.Errorf("encoding the record of %s: %w", r.EpisodeID, err)
		}
	}
	// Each turn's newline stands for its comma; the last one's is spare.
	return cw.n - int64(min(len(r.Turns), 1)), nil
}

// turnsKey is the turns field of a record encoded without its turns.
var turnsKey = []byte(`"turns":null`)

// WriteJSON writes r as its record line (JSON and a newline, as --record
// files hold it), a turn at a time: it holds one turn's JSON, not the
// line's.
func WriteJSON(out io.Writer, r *Record) error {
	var e lineEncoder
	return e.writeLine(out, r)
}

// lineEncoder writes records as lines, reusing its buffer.
type lineEncoder struct{ buf bytes.Buffer }

// writeLine writes r as one JSON line: the record without its turns,
// split where its turns go, and the turns one by one in between.
func (e *lineEncoder) writeLine(w io.Writer, r *Record) error {
	out := bufio.NewWriterSize(w, 64<<10)
	head := *r
	head.Turns = nil
	line, err := e.marshal(&head)
	if err != nil {
		return err
	}
	// Only Tools' raw JSON schemas, before the turns, could hold the key
	// unescaped; what follows the turns holds no raw JSON.
	at := bytes.LastIndex(line, turnsKey)
	if at < 0 {
		return fmt.Errorf("encoding the record of %s: no turns field", r.EpisodeID)
	}
	rest := bytes.Clone(line[at+len(turnsKey):])
	out.Write(line[:at])
	out.WriteString(`"turns":[`)
	for i := range r.Turns {
		if i > 0 {
			out.WriteByte(',')
		}
		b, err := e.marshal(&r.Turns[i])
		if err != nil {
			return err
		}
		out.Write(b)
	}
	out.WriteByte(']')
	out.Write(rest)
	out.WriteByte('\n')
	return out.Flush()
}

// marshal encodes v without HTML escapes (replies are full of
// <tool_call>) and without the encoder's newline, into the buffer: valid
// until the next call.
func (e *lineEncoder) marshal(v any) ([]byte, error) {
	e.buf.Reset()
	enc := json.NewEncoder(&e.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding a transcript record: %w", err)
	}
	return bytes.TrimSuffix(e.buf.Bytes(), []byte{'\n'}), nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// next opens the file the next line of day goes to: the day's last file
// when it has room for need more bytes, else a new one.
func (w *Writer) next(day string, need int64) error {
	if w.f != nil {
		err := syncClose(w.f)
		w.f = nil
		if err != nil {
			return fmt.Errorf("closing %s: %w", w.day, err)
		}
	}
	seq := 0
	if day == w.day {
		seq = w.seq + 1
	} else {
		seq = lastSeq(w.o.Dir, day)
	}
	for {
		path := filepath.Join(w.o.Dir, FileName(day, seq))
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("opening %s: %w", path, err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return fmt.Errorf("opening %s: %w", path, err)
		}
		if st.Size() > 0 && st.Size()+need > w.o.MaxFileBytes {
			f.Close()
			seq++
			continue
		}
		w.f, w.day, w.seq, w.size = f, day, seq, st.Size()
		return nil
	}
}

// FileName is the name of a day's seq-th file (from 0).
func FileName(day string, seq int) string {
	if seq == 0 {
		return day + ".jsonl"
	}
	return day + "." + strconv.Itoa(seq) + ".jsonl"
}

// lastSeq is the highest seq of day's files in dir (0 when none).
func lastSeq(dir, day string) int {
	matches, _ := filepath.Glob(filepath.Join(dir, day+"*.jsonl"))
	last := 0
	for _, m := range matches {
		if d, seq, ok := parseFileName(filepath.Base(m)); ok && d == day && seq > last {
			last = seq
		}
	}
	return last
}

// parseFileName reads DAY.jsonl and DAY.N.jsonl.
func parseFileName(name string) (day string, seq int, ok bool) {
	rest, ok := strings.CutSuffix(name, ".jsonl")
	if !ok || len(rest) < len(time.DateOnly) {
		return "", 0, false
	}
	day, rest = rest[:len(time.DateOnly)], rest[len(time.DateOnly):]
	if _, err := time.Parse(time.DateOnly, day); err != nil {
		return "", 0, false
	}
	if rest == "" {
		return day, 0, true
	}
	if rest[0] != '.' {
		return "", 0, false
	}
	n, err := strconv.Atoi(rest[1:])
	if err != nil || n <= 0 {
		return "", 0, false
	}
	return day, n, true
}

// syncClose syncs and closes f; a file that cannot be synced (a pipe)
// is only closed.
func syncClose(f *os.File) error {
	err := f.Sync()
	if errors.Is(err, syscall.EINVAL) {
		err = nil
	}
	return errors.Join(err, f.Close())
}
