package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/sdk/sandbox"

	"github.com/agentenv/agentenv/sdk/sdktest"
)

// envDir is an env folder holding this test binary as bin/testenv: the
// env the tests deploy (testenv mode, below). A sandbox sees the host's
// /tmp as its own, so the binary is copied where the env's folder is bound.
var envDir string

func TestMain(m *testing.M) {
	// The plugin runs its own binary as its helpers, and under go test
	// that binary is this one.
	if len(os.Args) > 1 {
		if run, ok := helpers[os.Args[1]]; ok {
			os.Exit(run(os.Args[2:]))
		}
		if os.Args[1] == "testenv" {
			os.Exit(runTestEnv())
		}
	}
	dir, err := os.MkdirTemp("", "bwrap-env-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	envDir = dir
	if err := copyExe(filepath.Join(dir, "bin", "testenv")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func copyExe(dst string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if os.Link(self, dst) == nil {
		return nil
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// needBwrap skips a test on a machine without bwrap, except in CI, where
// .ci/run installs it and its absence is a failure.
func needBwrap(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		sdktest.Missing(t, "bwrap", err.Error(), "apt-get install bubblewrap")
	}
}

// newTestPlugin is the plugin configured with a state dir of its own and
// extra settings; its log goes to the test's.
func newTestPlugin(t testing.TB, stateDir string, extra map[string]any) *plugin {
	t.Helper()
	cfg := map[string]any{"state_dir": stateDir, "grace": "2s"}
	for k, v := range extra {
		cfg[k] = v
	}
	raw, _ := json.Marshal(cfg)
	p := newPlugin()
	p.log = hclog.New(&hclog.LoggerOptions{Name: "bwrap", Output: testLog{t}, Level: hclog.Debug})
	if err := p.Configure(context.Background(), raw); err != nil {
		t.Fatal(err)
	}
	return p
}

type testLog struct{ t testing.TB }

func (w testLog) Write(b []byte) (int, error) {
	defer func() { _ = recover() }() // a line after the test ended
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// stateDir is a short temp folder (the relay's socket path is bounded).
func stateDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "bw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// testSpec deploys testenv.
func testSpec() sandbox.Spec {
	return sandbox.Spec{Env: "testenv", Dir: envDir, Command: []string{"bin/testenv", "testenv"}, Port: 18765,
		Labels: map[string]string{sandbox.LabelServer: "test"}}
}

// deploy deploys spec and terminates it when the test ends.
func deploy(t testing.TB, p *plugin, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := p.Deploy(ctx, spec)
	if err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	t.Cleanup(func() { _ = p.Terminate(context.Background(), sb) })
	return sb
}

// ask asks testenv at endpoint for path and returns its answer's body.
func ask(t testing.TB, endpoint, path string) string {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(endpoint + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
	}
	return string(body)
}

// runTestEnv is the env the tests deploy: an HTTP server on
// $AGENTENV_PORT answering questions about the sandbox it runs in.
func runTestEnv() int {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "testenv") })
	// /procs: the command lines of every process it can see.
	mux.HandleFunc("/procs", func(w http.ResponseWriter, _ *http.Request) {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			if _, err := strconv.Atoi(e.Name()); err != nil {
				continue
			}
			cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			fmt.Fprintf(w, "%s %s\n", e.Name(), strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	})
	// /write?path=P: try to create P; "ok" or the error.
	mux.HandleFunc("/write", func(w http.ResponseWriter, r *http.Request) {
		if err := os.WriteFile(r.URL.Query().Get("path"), []byte("written by the env\n"), 0o644); err != nil {
			fmt.Fprint(w, err)
			return
		}
		fmt.Fprint(w, "ok")
	})
	// /openw?path=P: open an existing P for writing, write nothing, close.
	mux.HandleFunc("/openw", func(w http.ResponseWriter, r *http.Request) {
		f, err := os.OpenFile(r.URL.Query().Get("path"), os.O_WRONLY, 0)
		if err != nil {
			fmt.Fprint(w, err)
			return
		}
		f.Close()
		fmt.Fprint(w, "ok")
	})
	// /read?path=P: P's content or the error.
	mux.HandleFunc("/read", func(w http.ResponseWriter, r *http.Request) {
		data, err := os.ReadFile(r.URL.Query().Get("path"))
		if err != nil {
			fmt.Fprint(w, err)
			return
		}
		w.Write(data)
	})
	// /dial?addr=A: "ok" when a TCP connection to A succeeds.
	mux.HandleFunc("/dial", func(w http.ResponseWriter, r *http.Request) {
		c, err := net.DialTimeout("tcp", r.URL.Query().Get("addr"), 2*time.Second)
		if err != nil {
			fmt.Fprint(w, err)
			return
		}
		c.Close()
		fmt.Fprint(w, "ok")
	})
	// /spawn: leave children behind that try hard to outlive the env: one
	// in a session of its own, one double-forked, one that ignores SIGTERM.
	mux.HandleFunc("/spawn", func(w http.ResponseWriter, _ *http.Request) {
		for _, script := range []string{"exec sleep 1000", "sleep 1001 & exit 0", "trap '' TERM; sleep 1002 & wait"} {
			c := exec.Command("sh", "-c", script)
			c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := c.Start(); err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			go c.Wait()
		}
		fmt.Fprint(w, "ok")
	})
	// /whoami: what the env knows about itself.
	mux.HandleFunc("/whoami", func(w http.ResponseWriter, _ *http.Request) {
		host, _ := os.Hostname()
		wd, _ := os.Getwd()
		var nofile, fsize syscall.Rlimit
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile)
		_ = syscall.Getrlimit(syscall.RLIMIT_FSIZE, &fsize)
		json.NewEncoder(w).Encode(map[string]any{
			"hostname": host, "wd": wd, "home": os.Getenv("HOME"), "tmpdir": os.Getenv("TMPDIR"),
			"port": os.Getenv(sandbox.EnvPort), "id": os.Getenv(sandbox.EnvSandboxID),
			"secret": os.Getenv("AGENTENV_TEST_SECRET"), "pid": os.Getpid(),
			"nofile": nofile.Cur, "fsize": fsize.Cur,
		})
	})
	addr := "127.0.0.1:" + os.Getenv(sandbox.EnvPort)
	if err := http.ListenAndServe(addr, mux); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	return 0
}
