// Package servetest runs the real agentenv binary in tests: it builds it
// (and the module's other commands) once per test binary run, serves a
// bundle with it on a free loopback port, waits until /health answers,
// and at the test's end stops it and checks that no env process it
// started is left. The suites of cmd/agentenv, examples/gridsim,
// examples/inbox and bench share it; BuildStatic also builds the static
// test binaries of the Docker, ECS and Kubernetes tests' images.
package servetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Agentenv is the agentenv command's package.
const Agentenv = "github.com/agentenv/agentenv/cmd/agentenv"

var (
	buildMu  sync.Mutex
	buildDir string
	builds   = map[string]*build{}
)

type build struct {
	once sync.Once
	dir  string // its own folder, under buildDir
	bin  string
	err  error
}

// Terminal is the command Harbor tasks' containers run (injected).
const Terminal = "github.com/agentenv/agentenv/cmd/agentenv-terminal"

// GridsimEnv is GridSim's env command, which its FROM-scratch images run.
const GridsimEnv = "github.com/agentenv/agentenv/examples/gridsim/envs/gridsim"

// static are the commands built static (CGO_ENABLED=0): they run in
// images that have no libc.
var static = map[string]bool{Terminal: true, GridsimEnv: true}

// TerminalBinary builds agentenv-terminal static (CGO_ENABLED=0, as the
// containers it is injected into need) once per run and returns its path:
// serve finds it through AGENTENV_TERMINAL_BINARY.
func TerminalBinary(t testing.TB) string { return Build(t, Terminal, "") }

// Binary builds agentenv once per test binary run and returns its path.
func Binary(t testing.TB) string { return Build(t, Agentenv, "") }

// Build builds the main package pkg of this module (an import path) with
// the build tags given (comma-separated; "" for none), once per run for
// each pkg and tags, and returns the binary's path (named after pkg's last
// element). Terminal and GridsimEnv are built static. Main removes the
// builds at the end of the run.
func Build(t testing.TB, pkg, tags string) string {
	t.Helper()
	buildMu.Lock()
	if buildDir == "" {
		dir, err := os.MkdirTemp("", "agentenv-servetest-")
		if err != nil {
			buildMu.Unlock()
			t.Fatal(err)
		}
		buildDir = dir
	}
	key := pkg + " " + tags
	b, ok := builds[key]
	if !ok {
		b = &build{dir: filepath.Join(buildDir, fmt.Sprint(len(builds)))}
		builds[key] = b
	}
	buildMu.Unlock()
	b.once.Do(func() {
		b.bin = filepath.Join(b.dir, filepath.Base(pkg))
		args := []string{"build", "-o", b.bin}
		if tags != "" {
			args = append(args, "-tags", tags)
		}
		b.err = goBuild(ModuleRoot(), static[pkg], append(args, pkg)...)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// ModuleRoot is the folder of agentenv's root module (this checkout).
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Main runs a package's tests (call it from TestMain: os.Exit(Main(m))).
// The agentenv processes the tests start keep their caches (plugin
// fingerprints, sandbox state) in a folder of the run's own, not the
// user's; Go's build cache and the npm oracle folder
// (core/tokenizer/tokenizertest/oracle) stay where they were, so builds
// stay warm and nothing is installed again. At the end it removes that
// folder and the builds.
func Main(m *testing.M) int {
	if user, err := os.UserCacheDir(); err == nil {
		for k, v := range map[string]string{
			"GOCACHE":             filepath.Join(user, "go-build"),
			"AGENTENV_ORACLE_DIR": filepath.Join(user, "agentenv", "tokenizer-oracle"),
		} {
			if os.Getenv(k) == "" {
				os.Setenv(k, v)
			}
		}
	}
	cache, err := os.MkdirTemp("", "agentenv-servetest-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(cache)
	os.Setenv("XDG_CACHE_HOME", cache)
	defer func() {
		buildMu.Lock()
		defer buildMu.Unlock()
		if buildDir != "" {
			os.RemoveAll(buildDir)
		}
	}()
	return m.Run()
}

// BuildStatic runs `go build -trimpath [flags] -o out pkg` in dir ("" for
// the test's own folder) with CGO_ENABLED=0: a static binary, for an image
// FROM scratch or a container without libc. The error carries the
// compiler's output. Unlike Build it builds every time it is called:
// callers that build once per run hold it in their own sync.Once.
func BuildStatic(dir, pkg, out string, flags ...string) error {
	args := append([]string{"build", "-trimpath"}, flags...)
	return goBuild(dir, true, append(args, "-o", out, pkg)...)
}

// goBuild runs the go command with args in dir, static or not.
func goBuild(dir string, static bool, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	if static {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		where := ""
		if dir != "" {
			where = " (in " + dir + ")"
		}
		return fmt.Errorf("go %s%s: %v\n%s", strings.Join(args, " "), where, err, out)
	}
	return nil
}
