package skyrl

import (
	"cmp"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// peakRSS is this process's peak resident memory (VmHWM), in bytes.
func peakRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// A template that recurses, loops or prints without end fails its render
// with an error naming its file — it does not crash this process (Go
// cannot recover from a stack overflow) nor grow it — and the template
// renders the next prompt as before.
func TestTemplateSandboxBounds(t *testing.T) {
	oldMem, oldTimeout := workerMaxMemory, renderTimeout
	workerMaxMemory = 256 << 20
	t.Cleanup(func() { workerMaxMemory, renderTimeout = oldMem, oldTimeout })
	const source = "/models/evil/chat_template.jinja"
	// Each case renders its bad part only when the prompt asks for it.
	guard := func(bad string) string {
		return `{% if messages[0].content == "bad" %}` + bad + `{% else %}<{{ messages[0].content }}>{% endif %}`
	}
	macro := `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}`
	for _, c := range []struct {
		name, template string
		bound          bool // ErrTemplateBound
		want           string
		timeout        time.Duration // renderTimeout; 0 is a minute, for -race on a busy machine
	}{
		{"self-recursive macro", macro + guard(`{{ f(0) }}`), true, "recursed past 64 MiB of stack", 0},
		{"huge range", guard(`{% for i in range(10**9) %}x{% endfor %}`), false, "range(0, 1000000000, 1) has more than 100000 items", 0},
		{"huge nested loop output", guard(`{% for i in range(100000) %}{{ "x" * 10000000 }}{% endfor %}`), true, "held over 256 MiB", 0},
		{"one huge string", guard(`{{ "x" * 10000000000 }}`), true, "held over 256 MiB", 0},
		{"loop without end", guard(`{% for i in range(100000) %}{% for j in range(100000) %}{% for k in range(100000) %}{% endfor %}{% endfor %}{% endfor %}`), true, "one render ran over 3s", 3 * time.Second},
		{"output over the bound", guard(`{{ "x" * (33 * 1024 * 1024) }}`), false, "printed 34603008 bytes for one prompt, over the bound of 33554432", 0},
		{"engine panic", guard(`{{ "x" * -1 }}`), false, "the engine failed", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			renderTimeout = cmp.Or(c.timeout, time.Minute)
			runtime.GC()
			before := peakRSS(t)
			tmpl, err := NewChatTemplate(TokenizerConfig{ChatTemplate: c.template, Source: source})
			if err != nil {
				t.Fatal(err)
			}
			defer tmpl.Close()
			start := time.Now()
			_, err = tmpl.Render([]Message{{"user", "bad"}}, Tools{}, true, Kwargs{})
			if err == nil || !strings.Contains(err.Error(), source) || !strings.Contains(err.Error(), c.want) || errors.Is(err, ErrTemplateBound) != c.bound {
				t.Fatalf("err = %v\nwant it to name %s and say %q (a bound: %v)", err, source, c.want, c.bound)
			}
			t.Logf("%v after %v", err, time.Since(start).Round(time.Millisecond))
			got, err := tmpl.Render([]Message{{"user", "fine"}}, Tools{}, true, Kwargs{})
			if err != nil || got != "<fine>" {
				t.Fatalf("the next render: %q, %v", got, err)
			}
			if grown := peakRSS(t) - before; grown > 64<<20 {
				t.Errorf("this process's peak memory grew by %d MiB", grown>>20)
			}
		})
	}
}

// Renders run concurrently on several workers, and the tools a worker
// lacks are sent to it.
func TestTemplateSandboxConcurrentRenders(t *testing.T) {
	tmpl, err := NewChatTemplate(TokenizerConfig{ChatTemplate: `{{ messages[0].content }}|{% for t in tools %}{{ t.function.name }}{% endfor %}`})
	if err != nil {
		t.Fatal(err)
	}
	defer tmpl.Close()
	sets := make([]Tools, 3)
	for i := range sets {
		if sets[i], err = ParseTools([]byte(`[{"type": "function", "function": {"name": "t`+strconv.Itoa(i)+`"}}]`), "tools"); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 64)
	for g := 0; g < 64; g++ {
		go func() {
			want := strconv.Itoa(g) + "|t" + strconv.Itoa(g%3)
			got, err := tmpl.Render([]Message{{"user", strconv.Itoa(g)}}, sets[g%3], false, Kwargs{})
			if err == nil && got != want {
				err = errors.New(got + ", want " + want)
			}
			errs <- err
		}()
	}
	for range 64 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	tmpl.Close()
	if _, err := tmpl.Render([]Message{{"user", "x"}}, Tools{}, false, Kwargs{}); err == nil {
		t.Error("a render after Close worked")
	}
}

// A template that does not compile is refused by NewChatTemplate, naming
// its file.
func TestTemplateSandboxCompileError(t *testing.T) {
	_, err := NewChatTemplate(TokenizerConfig{ChatTemplate: `{% for x in %}`, Source: "/m/tokenizer_config.json"})
	if err == nil || !strings.HasPrefix(err.Error(), "/m/tokenizer_config.json: compile the chat template") {
		t.Fatalf("err = %v", err)
	}
}
