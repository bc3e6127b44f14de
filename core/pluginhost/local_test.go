package pluginhost

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/builtin"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// inproc is a built-in tool format of the test binary, runnable in the
// host's process (New) or as `<test binary> plugin-serve` (TestMain).
// "pid" answers the process id, "panic" panics, "flood" reads 100
// unparsed calls of 2 KiB each; any other reply is its own content.
type inproc struct{}

func (inproc) Info() sdk.Info {
	return sdk.Info{Name: "inproc", Kind: sdk.KindToolFormat, Version: "1.0.0"}
}

func (inproc) Parse(_ context.Context, text string, _ []toolformat.Tool) (toolformat.Parsed, error) {
	switch text {
	case "pid":
		return toolformat.Parsed{Content: strconv.Itoa(os.Getpid())}, nil
	case "panic":
		panic("the parser hit a bug")
	case "flood":
		var p toolformat.Parsed
		for i := range 100 {
			p.Unparsed = append(p.Unparsed, toolformat.Unparsed{Text: strings.Repeat("x", 2048), Reason: fmt.Sprintf("bad call %d", i)})
		}
		return p, nil
	}
	return toolformat.Parsed{Content: text}, nil
}

func init() {
	builtin.Register(builtin.Plugin{Kind: sdk.KindToolFormat, Name: "inproc",
		Serve: func() { toolformat.Serve(inproc{}) }, New: func() sdk.Informer { return inproc{} }})
}

// inprocHost is a host whose built-in is the test binary's inproc format.
func inprocHost(t *testing.T, isolate bool) (*Host, string) {
	t.Helper()
	dir := t.TempDir()
	return newHost(t, dir, func(o *Options) {
		o.SelfExe, o.Builtins, o.IsolateToolFormats = "", []string{"toolformat-inproc"}, isolate
	}), dir
}

// A built-in tool format runs in the host's process by default and as a
// plugin-serve subprocess when the host isolates tool formats; both
// answer alike, bounds included, and a panic is one call's error.
func TestBuiltinToolFormatInProcess(t *testing.T) {
	for _, isolate := range []bool{false, true} {
		t.Run(fmt.Sprintf("isolate=%v", isolate), func(t *testing.T) {
			h, _ := inprocHost(t, isolate)
			ctx := ctxTimeout(t, time.Minute)
			p, err := h.ToolFormat(ctx, "inproc", nil)
			if err != nil {
				t.Fatal(err)
			}
			set := toolformat.NewToolSet(nil)
			pid := parseContent(t, ctx, p, "pid", set)
			if inProc := pid == strconv.Itoa(os.Getpid()); inProc == isolate {
				t.Fatalf("parsed in pid %s (this process %d), isolate=%v", pid, os.Getpid(), isolate)
			}
			if got := h.starts.Load(); (got == 0) != !isolate {
				t.Errorf("%d processes started, isolate=%v", got, isolate)
			}
			es, err := h.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(es) != 1 || es[0].InProcess == isolate || (len(es[0].PIDs) == 1) != isolate {
				t.Errorf("plugins list: %+v", es)
			}
			if got := parseContent(t, ctx, p, "ok\xff", set); got != "ok\uFFFD" {
				t.Errorf("invalid UTF-8 read as %q", got)
			}
			flood, err := toolformat.ParseWith(ctx, p, "flood", set)
			if err != nil {
				t.Fatal(err)
			}
			if len(flood.Unparsed) != toolformat.MaxUnparsedSent || flood.UnparsedOmitted != 100-toolformat.MaxUnparsedSent ||
				len(flood.Unparsed[0].Text) > 1024+len("…") || flood.Unparsed[1].Reason != "bad call 1" {
				t.Errorf("flood: %d sent, %d omitted, first text %d bytes", len(flood.Unparsed), flood.UnparsedOmitted, len(flood.Unparsed[0].Text))
			}
			if isolate {
				return // a panic in a subprocess is a crash and restart: lifecycle_test.go
			}
			_, err = toolformat.ParseWith(ctx, p, "panic", set)
			if err == nil || !strings.Contains(err.Error(), "tool format inproc failed on this reply (it panicked: the parser hit a bug)") || strings.Contains(err.Error(), ".go:") {
				t.Errorf("panic: %v", err)
			}
			if got := parseContent(t, ctx, p, "after", set); got != "after" {
				t.Errorf("after a panic: %q", got)
			}
		})
	}
}

// A plugin binary that comes to override a built-in tool format running
// in process takes over at Reload, as it would from a subprocess.
func TestReloadMovesInProcessFormatToBinary(t *testing.T) {
	h, dir := inprocHost(t, false)
	ctx := ctxTimeout(t, time.Minute)
	p, err := h.ToolFormat(ctx, "inproc", nil)
	if err != nil {
		t.Fatal(err)
	}
	set := toolformat.NewToolSet(nil)
	if pid := parseContent(t, ctx, p, "pid", set); pid != strconv.Itoa(os.Getpid()) {
		t.Fatalf("not in process: pid %s", pid)
	}
	if err := h.Reload(); err != nil {
		t.Fatalf("reload with nothing new: %v", err)
	}
	if h.starts.Load() != 0 {
		t.Fatal("a reload with nothing new started a process")
	}
	install(t, toolFormatV(t, ""), dir, "agentenv-toolformat-inproc")
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	if pid := parseContent(t, ctx, p, "pid", set); pid == strconv.Itoa(os.Getpid()) {
		t.Fatal("still in process after the override's reload")
	}
}
