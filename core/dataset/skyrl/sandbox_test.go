package skyrl

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"
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

// The same tools parsed twice are two documents to the workers, each with
// its own markers for the values printed unlike Python (a float): the
// second renders as the first (it was refused, the worker holding the
// first parse's markers).
func TestTemplateSandboxSameToolsParsedTwice(t *testing.T) {
	tmpl, err := NewChatTemplate(TokenizerConfig{ChatTemplate: `{{ tools | tojson }}`})
	if err != nil {
		t.Fatal(err)
	}
	defer tmpl.Close()
	raw := []byte(`[{"type": "function", "function": {"name": "f", "parameters": {"default": 1.0}}}]`)
	for i := range 3 {
		tools, err := ParseTools(raw, "tools")
		if err != nil {
			t.Fatal(err)
		}
		got, err := tmpl.Render(nil, tools, false, Kwargs{})
		if err != nil || !strings.Contains(got, `"default": 1.0`) {
			t.Fatalf("parse %d: %q, %v", i, got, err)
		}
	}
}

// orphanHostEnv makes the test binary the host of TestTemplateWorkerOutlivesNoHost.
const orphanHostEnv = "AGENTENV_TEST_ORPHAN_HOST"

// A worker whose host is killed in the middle of an endless render ends
// itself (its parent changed) instead of spinning on as an orphan.
func TestTemplateWorkerOutlivesNoHost(t *testing.T) {
	if os.Getenv(orphanHostEnv) == "1" {
		renderTimeout = time.Hour // only the host's death may end the worker
		tmpl, err := NewChatTemplate(TokenizerConfig{ChatTemplate: `{% for i in range(100000) %}{% for j in range(100000) %}{% for k in range(100000) %}{% endfor %}{% endfor %}{% endfor %}`})
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("rendering\n")
		tmpl.Render(nil, Tools{}, false, Kwargs{})
		return
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	host := exec.Command(os.Args[0], "-test.run", "^TestTemplateWorkerOutlivesNoHost$")
	host.Env = append(os.Environ(), orphanHostEnv+"=1")
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "rendering\n" {
		t.Fatalf("host: %q, %v", line, err)
	}
	worker := 0
	wait.Until(t, "a worker under the host", func() bool { worker = childOf(host.Process.Pid); return worker != 0 })
	host.Process.Kill()
	host.Wait()
	gone := false
	t.Cleanup(func() {
		if !gone {
			syscall.Kill(worker, syscall.SIGKILL)
		}
	})
	wait.Until(t, fmt.Sprintf("worker %d to exit after its host was killed", worker), func() bool {
		err := syscall.Kill(worker, 0)
		return errors.Is(err, syscall.ESRCH)
	})
	gone = true
}

// childOf returns a child process of pid, or 0.
func childOf(pid int) int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, not ')'.
		_, rest, ok := strings.Cut(string(b), ") ")
		if f := strings.Fields(rest); ok && len(f) > 1 && f[1] == strconv.Itoa(pid) {
			n, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return n
		}
	}
	return 0
}
