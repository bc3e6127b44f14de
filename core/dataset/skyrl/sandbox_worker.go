package skyrl

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"github.com/ardanlabs/jinja"
)

// The worker side of the template sandbox (see sandbox.go): a process
// started as this same binary with workerArg and workerEnv, which compiles
// the template it is sent and renders each request, one at a time.

const (
	workerArg = "__agentenv-chat-template-worker"
	workerEnv = "AGENTENV_CHAT_TEMPLATE_WORKER"
)

// The worker's bounds. Go cannot recover from a stack overflow, and
// ardanlabs/jinja offers no hook to count a render's calls, loops or
// output, so the bounds are the process's: its goroutine stacks are
// capped (a template recursing without end overflows in a second, not
// after gigabytes), and a watchdog ends it once its memory passes
// workerMaxMemory. The time bound is the host's (renderTimeout).
const (
	workerMaxStack = 64 << 20
	// exitOverMemory is the worker's exit status when the watchdog ends it.
	exitOverMemory = 3
	// exitOrphaned is its exit status when it ends itself, its host gone.
	exitOrphaned = 4
	// maxRange is the most items range() makes, as in Jinja2's sandbox,
	// which transformers renders with (MAX_RANGE): a larger range is
	// refused at once, not built item by item.
	maxRange = 100_000
	// MaxRenderBytes bounds one rendered prompt.
	MaxRenderBytes = 32 << 20
)

// workerMaxMemory bounds a worker's memory (tests lower it).
var workerMaxMemory uint64 = 1 << 30

func init() {
	// Both the argument and the variable: neither alone turns a run of
	// the binary into a worker by accident.
	if len(os.Args) == 2 && os.Args[1] == workerArg && os.Getenv(workerEnv) == "1" {
		os.Exit(runWorker(os.Stdin, os.Stdout))
	}
}

// workerInit is the first message to a worker: the template.
type workerInit struct {
	Template  string
	Special   map[string]string // bos_token, ...: those the model has
	MaxMemory uint64
	// Timeout is the host's bound on a render, which kills the worker
	// past it; the worker ends itself past twice it, should the host be
	// gone (killed) and unable to.
	Timeout time.Duration
}

// renderRequest is one render. The tools are sent the first time a
// worker needs them (ToolsRaw); later requests name them by ToolsID.
type renderRequest struct {
	Messages     []Message
	ToolsID      string          `json:",omitempty"`
	ToolsRaw     json.RawMessage `json:",omitempty"`
	ToolsPrefix  string          `json:",omitempty"`
	Kwargs       string          `json:",omitempty"`
	KwargsPrefix string          `json:",omitempty"`
	AddGen       bool
	Marked       bool
	// Now is strftime_now's clock: Unix nanoseconds in the zone Zone,
	// Offset seconds east of UTC.
	Now    int64
	Zone   string
	Offset int

	toolsRaw []byte // what ToolsRaw is set to when the worker lacks it
}

// renderReply answers a request (or, Out empty, the init).
type renderReply struct {
	Out       string `json:",omitempty"`
	Err       string `json:",omitempty"`
	Raised    bool   `json:",omitempty"` // Err came from raise_exception
	NeedTools bool   `json:",omitempty"` // resend with ToolsRaw
}

func runWorker(in io.Reader, out io.Writer) int {
	debug.SetMaxStack(workerMaxStack)
	dec := json.NewDecoder(bufio.NewReaderSize(in, 1<<16))
	bw := bufio.NewWriterSize(out, 1<<16)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	send := func(r renderReply) bool { return enc.Encode(r) == nil && bw.Flush() == nil }
	var init workerInit
	if dec.Decode(&init) != nil {
		return 1
	}
	var busySince atomic.Int64 // UnixNano of the render under way; 0 between
	go watch(init, &busySince, os.Getppid(), 5*time.Millisecond)
	r, err := newRenderer(init)
	if err != nil {
		send(renderReply{Err: err.Error()})
		return 0
	}
	if !send(renderReply{}) {
		return 1
	}
	tools := map[string]*jsonValue{}
	for {
		var req renderRequest
		if err := dec.Decode(&req); err != nil {
			return 0 // the host closed the pipe: done
		}
		busySince.Store(time.Now().UnixNano())
		rep := r.serve(&req, tools)
		busySince.Store(0)
		if !send(rep) {
			return 1
		}
	}
}

// watch ends the process once the memory the runtime holds passes the
// bound: a render that grows a string or a list without end is stopped a
// few milliseconds past it (a single huge allocation is counted as soon
// as it is made, before it is written). It also ends a worker whose host
// is gone (its parent changed) in the middle of a render, or whose render
// ran past twice the host's time bound: the host would have killed it.
func watch(init workerInit, busySince *atomic.Int64, parent int, every time.Duration) {
	samples := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	for range time.Tick(every) {
		metrics.Read(samples)
		if held := samples[0].Value.Uint64() - samples[1].Value.Uint64(); held > init.MaxMemory {
			fmt.Fprintf(os.Stderr, "agentenv chat template worker: %d bytes held, over the bound of %d\n", held, init.MaxMemory)
			os.Exit(exitOverMemory)
		}
		since := busySince.Load()
		if since != 0 && (os.Getppid() != parent || init.Timeout > 0 && time.Since(time.Unix(0, since)) > 2*init.Timeout) {
			os.Exit(exitOrphaned)
		}
	}
}

// renderer renders requests with a compiled template.
type renderer struct {
	tmpl    *jinja.Template
	special map[string]jinja.Value
}

func newRenderer(init workerInit) (r *renderer, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("compile the chat template: the engine failed: %v", p)
		}
	}()
	tmpl, err := jinja.Compile(init.Template)
	if err != nil {
		return nil, fmt.Errorf("compile the chat template: %w", err)
	}
	r = &renderer{tmpl: tmpl, special: map[string]jinja.Value{}}
	for k, v := range init.Special {
		r.special[k] = jinja.NewString(v)
	}
	return r, nil
}

func (r *renderer) serve(req *renderRequest, tools map[string]*jsonValue) (rep renderReply) {
	fail := func(err error) renderReply { return renderReply{Err: err.Error(), Raised: errors.Is(err, errRaised)} }
	var tv, kv *jsonValue
	if req.ToolsID != "" {
		if tv = tools[req.ToolsID]; tv == nil {
			if len(req.ToolsRaw) == 0 {
				return renderReply{NeedTools: true}
			}
			var err error
			if tv, err = parseJSONValueAs(req.ToolsRaw, "tools", req.ToolsPrefix); err != nil {
				return fail(err)
			}
			tools[req.ToolsID] = tv
		}
	}
	if req.Kwargs != "" {
		var err error
		if kv, err = parseJSONValueAs([]byte(req.Kwargs), "chat template kwargs", req.KwargsPrefix); err != nil {
			return fail(err)
		}
	}
	now := time.Unix(0, req.Now).In(time.FixedZone(req.Zone, req.Offset))
	defer func() {
		// The engine panics on some input ("x" * -1); that is the
		// template's failure, not the worker's.
		if p := recover(); p != nil {
			rep = fail(fmt.Errorf("render the chat template: the engine failed: %v", p))
		}
	}()
	out, err := r.render(req.Messages, tv, req.AddGen, kv, req.Marked, now)
	if err != nil {
		return fail(err)
	}
	if len(out) > MaxRenderBytes {
		return fail(fmt.Errorf("the chat template printed %d bytes for one prompt, over the bound of %d", len(out), MaxRenderBytes))
	}
	return renderReply{Out: out}
}

func (r *renderer) render(messages []Message, tools *jsonValue, addGen bool, kwargs *jsonValue, marked bool, now time.Time) (string, error) {
	data := make(map[string]jinja.Value, 9+len(r.special))
	for k, v := range r.special {
		data[k] = v
	}
	msgs := make([]jinja.Value, len(messages))
	for i, m := range messages {
		d := jinja.NewDict()
		d.AsDict().Set("role", jinja.NewString(m.Role))
		d.AsDict().Set("content", jinja.NewString(m.Content))
		msgs[i] = d
	}
	data["messages"] = jinja.NewList(msgs)
	data["tools"] = jinja.None()
	if tools != nil {
		data["tools"] = copyValue(pick(tools, marked))
	}
	data["documents"] = jinja.None()
	data["add_generation_prompt"] = jinja.NewBool(addGen)
	data["raise_exception"] = jinja.NewCallable("raise_exception", raiseException)
	data["strftime_now"] = jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		return strftimeNow(now, args)
	})
	// The template's data comes before the engine's globals: this range
	// takes the place of the engine's, which builds any range asked for.
	data["range"] = jinja.NewCallable("range", boundedRange)
	if kwargs != nil {
		kw := pick(kwargs, marked).AsDict()
		for _, k := range kw.Keys {
			data[k] = copyValue(kw.Data[k])
		}
	}
	out, err := r.tmpl.RenderValues(data)
	if err != nil {
		if errors.Is(err, errRaised) {
			return "", err
		}
		return "", fmt.Errorf("render the chat template: %w", err)
	}
	return out, nil
}

// boundedRange is range() as the engine has it (which takes 10**9, a
// float in this engine, as an integer), refusing more than maxRange items.
func boundedRange(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	n := make([]float64, len(args))
	for i, a := range args {
		switch {
		case a.IsInt():
			n[i] = float64(a.AsInt())
		case a.IsFloat() && a.AsFloat() == math.Trunc(a.AsFloat()):
			n[i] = a.AsFloat()
		case a.IsBool():
			if a.AsBool() {
				n[i] = 1
			}
		default:
			return jinja.Undefined(), fmt.Errorf("range: %s is not an integer", a.String())
		}
	}
	start, stop, step := 0.0, 0.0, 1.0
	switch len(n) {
	case 1:
		stop = n[0]
	case 2:
		start, stop = n[0], n[1]
	case 3:
		start, stop, step = n[0], n[1], n[2]
	default:
		return jinja.Undefined(), fmt.Errorf("range: expected 1-3 arguments, got %d", len(args))
	}
	if step == 0 {
		return jinja.Undefined(), errors.New("range: step must not be zero")
	}
	// In floats, so that no bound overflows int64 before it is checked.
	if count := (stop - start) / step; count > maxRange {
		return jinja.Undefined(), fmt.Errorf("range(%.0f, %.0f, %.0f) has more than %d items, which Jinja2's sandbox (transformers') refuses too", start, stop, step, maxRange)
	}
	var items []jinja.Value
	for i, end, d := int64(start), int64(stop), int64(step); (d > 0 && i < end) || (d < 0 && i > end); i += d {
		items = append(items, jinja.NewInt(i))
	}
	return jinja.NewList(items), nil
}

func pick(v *jsonValue, marked bool) jinja.Value {
	if marked {
		return v.marked
	}
	return v.plain
}

// copyValue copies lists and dicts, so that a template that changes its
// data (list.append; transformers' sandbox forbids it, this engine does
// not) cannot change the tools other renders share.
func copyValue(v jinja.Value) jinja.Value {
	switch {
	case v.IsList():
		items := make([]jinja.Value, len(v.AsList().Items))
		for i, it := range v.AsList().Items {
			items[i] = copyValue(it)
		}
		return jinja.NewList(items)
	case v.IsDict():
		src := v.AsDict()
		d := jinja.NewDict()
		dst := d.AsDict()
		dst.Keys = make([]string, len(src.Keys))
		copy(dst.Keys, src.Keys)
		dst.Data = make(map[string]jinja.Value, len(src.Data))
		for k, it := range src.Data {
			dst.Data[k] = copyValue(it)
		}
		return d
	}
	return v
}

func raiseException(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	msg := ""
	if len(args) > 0 {
		msg = args[0].String()
		if args[0].IsString() {
			msg = args[0].AsString()
		}
	}
	return jinja.Undefined(), fmt.Errorf("%w: %s", errRaised, msg)
}

// strftimeNow is transformers' strftime_now(format): the local time in
// Python's strftime format.
func strftimeNow(now time.Time, args []jinja.Value) (jinja.Value, error) {
	if len(args) != 1 || !args[0].IsString() {
		return jinja.Undefined(), errors.New("strftime_now takes one format string")
	}
	s, err := strftime(now, args[0].AsString())
	if err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(s), nil
}
