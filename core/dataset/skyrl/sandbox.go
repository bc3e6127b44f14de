package skyrl

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// A chat template comes with a model's tokenizer folder, which anyone may
// publish: a macro that calls itself, a range(10**9), a loop printing
// gigabytes. transformers renders templates in Jinja2's sandbox, which
// refuses such ranges and stops at Python's recursion limit; the Go engine
// (ardanlabs/jinja v1.8.0, the last for this Go) has no such bounds and
// no hook to add them, and in Go a stack overflow or an allocation past
// memory kills the process beyond recovery. So templates are compiled and
// rendered in worker processes — this binary again (sandbox_worker.go) —
// with a capped stack, a memory watchdog, a bounded output and, here, a
// time limit per render; a worker that breaks a bound dies or is killed,
// the render fails naming the template's file, and the next render starts
// a fresh worker.

// ErrTemplateBound is a render the sandbox stopped: the template recursed,
// grew or ran past a bound.
var ErrTemplateBound = errors.New("the chat template broke a bound of its sandbox")

// renderTimeout bounds one render; real templates take milliseconds.
var renderTimeout = 10 * time.Second

// maxWorkers bounds the worker processes of one template, each of which
// may hold up to workerMaxMemory.
var maxWorkers = min(runtime.GOMAXPROCS(0), 4)

// raisedError is the template's raise_exception, passed back from a worker.
type raisedError struct{ msg string }

func (e *raisedError) Error() string        { return e.msg }
func (e *raisedError) Is(target error) bool { return target == errRaised }

// renderPool runs a template's renders on up to maxWorkers workers.
type renderPool struct {
	init   workerInit
	source string // the template's file, for errors
	slots  chan struct{}
	mu     sync.Mutex
	idle   []*worker
	closed bool
}

// newRenderPool compiles the template in a first worker, which it keeps.
func newRenderPool(init workerInit, source string) (*renderPool, error) {
	if source == "" {
		source = "the chat template"
	}
	p := &renderPool{init: init, source: source, slots: make(chan struct{}, maxWorkers)}
	w, err := p.start()
	if err != nil {
		return nil, err
	}
	p.put(w)
	return p, nil
}

func (p *renderPool) render(req *renderRequest) (string, error) {
	p.slots <- struct{}{}
	defer func() { <-p.slots }()
	w, err := p.get()
	if err != nil {
		return "", err
	}
	rep, err := w.do(req)
	if err != nil {
		return "", p.failed(w, err)
	}
	p.put(w)
	switch {
	case rep.Raised:
		return "", &raisedError{rep.Err}
	case rep.Err != "":
		return "", fmt.Errorf("%s: %s", p.source, rep.Err)
	}
	return rep.Out, nil
}

func (p *renderPool) get() (*worker, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("%s: the template was closed", p.source)
	}
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return w, nil
	}
	p.mu.Unlock()
	return p.start()
}

func (p *renderPool) put(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		w.stop()
		return
	}
	p.idle = append(p.idle, w)
}

func (p *renderPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, w := range p.idle {
		w.stop()
	}
	p.idle = nil
}

// start starts a worker and has it compile the template.
func (p *renderPool) start() (*worker, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("%s: start a worker to render it: %w", p.source, err)
	}
	if runtime.GOOS == "linux" {
		self = "/proc/self/exe" // this binary even if its file was replaced since
	}
	cmd := exec.Command(self, workerArg)
	// GOTRACEBACK=none: a worker's fatal error is one line, not a trace
	// of thousands of frames.
	cmd.Env = append(os.Environ(), workerEnv+"=1", "GOTRACEBACK=none", "GOMAXPROCS=2")
	// Its own process group: a Ctrl-C meant for this command (which eval
	// answers with a summary) must not kill a render mid-way; the worker
	// ends when its input closes, as it does when this process exits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w := &worker{cmd: cmd, stderr: &tail{max: 4 << 10}, exited: make(chan struct{})}
	cmd.Stderr = w.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start a worker to render it: %w", p.source, err)
	}
	go func() { w.waitErr = cmd.Wait(); close(w.exited) }()
	w.in, w.enc, w.dec = in, json.NewEncoder(in), json.NewDecoder(bufio.NewReaderSize(out, 1<<16))
	w.enc.SetEscapeHTML(false)
	w.tools = map[string]bool{}
	rep, err := w.call(p.init)
	if err != nil {
		return nil, p.failed(w, err)
	}
	if rep.Err != "" {
		w.stop()
		return nil, fmt.Errorf("%s: %s", p.source, rep.Err)
	}
	return w, nil
}

// failed stops a worker whose request failed and says why it did.
func (p *renderPool) failed(w *worker, err error) error {
	w.stop()
	<-w.exited
	last := w.stderr.String()
	switch {
	case w.timedOut.Load():
		return fmt.Errorf("%s: %w: one render ran over %v (a loop without end?)", p.source, ErrTemplateBound, renderTimeout)
	case strings.Contains(last, "stack overflow") || strings.Contains(last, "stack exceeds"):
		return fmt.Errorf("%s: %w: it recursed past %d MiB of stack (a macro that calls itself without end?); Jinja2 stops such a template at Python's recursion limit", p.source, ErrTemplateBound, workerMaxStack>>20)
	case w.exitCode() == exitOverMemory || strings.Contains(last, "out of memory"):
		return fmt.Errorf("%s: %w: one render held over %d MiB (a loop or a string that grows without end?)", p.source, ErrTemplateBound, workerMaxMemory>>20)
	}
	if line := lastLine(last); line != "" {
		return fmt.Errorf("%s: the worker rendering it failed (%v): %s: %w", p.source, w.waitErr, line, err)
	}
	return fmt.Errorf("%s: the worker rendering it failed (%v): %w", p.source, w.waitErr, err)
}

// worker is one worker process.
type worker struct {
	cmd      *exec.Cmd
	in       io.WriteCloser
	enc      *json.Encoder
	dec      *json.Decoder
	stderr   *tail
	tools    map[string]bool // tool lists it holds
	exited   chan struct{}
	waitErr  error
	timedOut atomic.Bool
}

// do sends a render, and the tools it names if the worker lacks them.
func (w *worker) do(req *renderRequest) (renderReply, error) {
	r := *req
	if r.ToolsID != "" && !w.tools[r.ToolsID] {
		r.ToolsRaw = r.toolsRaw
	}
	rep, err := w.call(&r)
	if err == nil && rep.NeedTools && r.ToolsRaw == nil {
		r.ToolsRaw = r.toolsRaw
		rep, err = w.call(&r)
	}
	if err == nil && r.ToolsID != "" {
		w.tools[r.ToolsID] = true
	}
	return rep, err
}

// call sends msg and reads the reply, killing the worker past the time
// bound.
func (w *worker) call(msg any) (renderReply, error) {
	timer := time.AfterFunc(renderTimeout, func() {
		w.timedOut.Store(true)
		w.cmd.Process.Kill()
	})
	defer timer.Stop()
	var rep renderReply
	if err := w.enc.Encode(msg); err != nil {
		return rep, err
	}
	if err := w.dec.Decode(&rep); err != nil {
		return rep, err
	}
	return rep, nil
}

// stop ends the worker: closing its input ends its loop, and a kill
// ends whatever it is stuck in.
func (w *worker) stop() {
	w.in.Close()
	w.cmd.Process.Kill()
}

func (w *worker) exitCode() int {
	if w.cmd.ProcessState == nil {
		return -1
	}
	return w.cmd.ProcessState.ExitCode()
}

// tail keeps the first and the last max bytes written to it: a Go fatal
// error says what it was first, then prints the runtime's stack.
type tail struct {
	mu         sync.Mutex
	max        int
	head, tail []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if room := t.max - len(t.head); room > 0 {
		k := min(room, len(p))
		t.head, p = append(t.head, p[:k]...), p[k:]
	}
	t.tail = append(t.tail, p...)
	if len(t.tail) > t.max {
		t.tail = append(t.tail[:0], t.tail[len(t.tail)-t.max:]...)
	}
	return n, nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.head) + string(t.tail)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
