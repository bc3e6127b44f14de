package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/client"
	"github.com/agentenv/agentenv/core/pluginhost"
	"github.com/agentenv/agentenv/core/runtime"
	"github.com/agentenv/agentenv/core/server"
	"github.com/agentenv/agentenv/core/testenv/testenvbuild"
)

// The test env and the plugins, built once and run as real subprocesses.
var testenvBin, pluginDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "serve-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if testenvBin, err = testenvbuild.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pluginDir = filepath.Join(dir, "plugins")
	if _, err := testenvbuild.BuildCommands(pluginDir, map[string]string{
		"agentenv-sandbox-local":     "../../plugins/sandbox-local/cmd/agentenv-sandbox-local",
		"agentenv-toolformat-hermes": "../../plugins/toolformat-hermes/cmd/agentenv-toolformat-hermes",
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if left := testenvbuild.Procs(testenvBin); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: env processes left behind after the suite: %v\n", left)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// testBundle writes a one-task bundle whose env is the test env, started with
// env.toml's envTOML added.
func testBundle(t *testing.T, envTOML string) string {
	t.Helper()
	dir := t.TempDir()
	if err := testenvbuild.WriteBundle(dir, testenvBin, envTOML); err != nil {
		t.Fatal(err)
	}
	return dir
}

// served is a Run in the background.
type served struct {
	url  string
	stop chan os.Signal
	done chan struct{} // closed when Run returned err
	err  error
}

// start runs Run on a bundle in the background; the test's cleanup stops
// it if the test did not.
func start(t *testing.T, dir string) *served { t.Helper(); return startWith(t, dir, nil) }

// startWith is start with mod (if not nil) adjusting Run's options.
func startWith(t *testing.T, dir string, mod func(*Options)) *served {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]string{"state_dir": t.TempDir(), "grace": "1s", "mode": "process"})
	s := &served{url: "http://" + ln.Addr().String(), stop: make(chan os.Signal, 2), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		o := Options{
			Listener: ln, Addr: ln.Addr().String(), Version: "test",
			Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr}),
			Runtime: runtime.Options{
				SandboxConfig: cfg, ToolFormat: "hermes", ServersDir: t.TempDir(),
				Plugins: pluginhost.Options{
					SelfExe: "/nonexistent/agentenv", SearchPath: []string{pluginDir}, Builtins: []string{}, CachePath: "-",
				},
			},
			Server:          server.Options{MaxConcurrentEnvs: 4},
			ShutdownTimeout: 30 * time.Second,
		}
		if mod != nil {
			mod(&o)
		}
		s.err = Run(dir, o, s.stop)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
			return
		case s.stop <- syscall.SIGTERM:
		}
		if s.wait(time.Minute) {
			t.Error("Run did not return a minute after the cleanup's signal")
		}
	})
	return s
}

// wait waits for Run to return, and says whether it was still running
// after d.
func (s *served) wait(d time.Duration) (timedOut bool) {
	select {
	case <-s.done:
		return false
	case <-time.After(d):
		return true
	}
}

// reset opens a session and resets the task: a live episode, its env a
// running process.
func reset(t *testing.T, url string) *client.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(url, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Reset(ctx, client.ResetRequest{TaskID: "puzzle"}); err != nil {
		t.Fatal(err)
	}
	return s
}

// A signal drains: the live episode is torn down, its env process gone,
// the listener closed, and Run returns nil.
func TestRunDrainsOnSignal(t *testing.T) {
	srv := start(t, testBundle(t, ""))
	s := reset(t, srv.url)
	if len(testenvbuild.Procs(testenvBin)) == 0 {
		t.Fatal("no env process runs for the live episode")
	}
	srv.stop <- syscall.SIGTERM
	if srv.wait(time.Minute) {
		t.Fatal("Run still running a minute after a signal")
	}
	if srv.err != nil {
		t.Fatalf("Run after a signal: %v", srv.err)
	}
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Error("the session is still open after Run returned")
	}
	if left := testenvbuild.Procs(testenvBin); len(left) > 0 {
		t.Errorf("env processes left after the drain: %v", left)
	}
	if c, err := net.DialTimeout("tcp", srv.url[len("http://"):], time.Second); err == nil {
		c.Close()
		t.Error("the listener still accepts after Run returned")
	}
}

// A second signal while a teardown is slow (the env ignores SIGTERM and
// waits out the sandbox's grace) returns ErrAbandoned at once.
func TestRunSecondSignalAbandons(t *testing.T) {
	srv := start(t, testBundle(t, "[env]\nTESTENV_IGNORE_TERM = \"1\"\n"))
	reset(t, srv.url)
	t.Cleanup(func() {
		// The teardown was abandoned: kill what it left and remove its
		// sandboxes' temp dirs, as a restart's reap would (the state dir
		// that would lead one there is the test's own, gone with it).
		for _, pid := range testenvbuild.Procs(testenvBin) {
			work, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)) // <root>/work
			syscall.Kill(pid, syscall.SIGKILL)
			if root := filepath.Dir(work); strings.HasPrefix(filepath.Base(root), "agentenv-local-") {
				if err := os.RemoveAll(root); err != nil {
					t.Errorf("removing the abandoned env's temp dir: %v", err)
				}
			}
		}
	})
	srv.stop <- syscall.SIGTERM
	srv.stop <- syscall.SIGINT
	if srv.wait(30 * time.Second) {
		t.Fatal("Run still running 30 s after a second signal")
	}
	if !errors.Is(srv.err, ErrAbandoned) {
		t.Fatalf("Run after two signals: %v, want ErrAbandoned", srv.err)
	}
}

// The live page is served unless NoUI (serve --ui=false) says not to.
func TestRunLivePageSwitch(t *testing.T) {
	for _, c := range []struct {
		noUI bool
		want int
	}{{false, http.StatusOK}, {true, http.StatusNotFound}} {
		t.Run(fmt.Sprintf("NoUI=%v", c.noUI), func(t *testing.T) {
			srv := startWith(t, testBundle(t, ""), func(o *Options) { o.NoUI = c.noUI })
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cl, err := client.New(srv.url, client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.Health(ctx); err != nil { // served, not preparing
				t.Fatal(err)
			}
			resp, err := http.Get(srv.url + "/ui/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("GET /ui/: %d, want %d", resp.StatusCode, c.want)
			}
		})
	}
}
