package pluginhost

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/sdk/builtin"
	"github.com/agentenv/agentenv/sdk/reward"
)

// The tests run real plugin binaries, built once per test run from
// testdata/ into a shared temp folder.

var (
	binDir  string
	builds  sync.Map // key -> *buildResult
	goTool  string
	tempDir string
)

type buildResult struct {
	once sync.Once
	path string
	err  error
}

func TestMain(m *testing.M) {
	// The test binary serves its own built-ins (local_test.go) as agentenv
	// does: `<binary> plugin-serve <kind>-<name>`.
	if len(os.Args) == 3 && os.Args[1] == "plugin-serve" {
		if p, ok := builtin.Lookup(os.Args[2]); ok {
			p.Serve()
		}
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "pluginhost-test-bins")
	if err != nil {
		panic(err)
	}
	binDir = dir
	goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// build compiles ./testdata/<pkg> once per distinct ldflags and returns
// the binary's path.
func build(t testing.TB, pkg, ldflags string) string {
	t.Helper()
	key := pkg + "|" + ldflags
	v, _ := builds.LoadOrStore(key, &buildResult{})
	b := v.(*buildResult)
	b.once.Do(func() {
		out := filepath.Join(binDir, pkg+"-"+safeName(ldflags))
		args := []string{"build", "-o", out}
		if ldflags != "" {
			args = append(args, "-ldflags", ldflags)
		}
		cmd := exec.Command(goTool, append(args, "./testdata/"+pkg)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			b.err = err
			b.path = stderr.String()
			return
		}
		b.path = out
	})
	if b.err != nil {
		t.Fatalf("build testdata/%s: %v\n%s", pkg, b.err, b.path)
	}
	return b.path
}

func safeName(s string) string {
	out := []byte(s)
	for i, c := range out {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			out[i] = '_'
		}
	}
	return string(out)
}

// rewardV builds the test reward plugin at version v.
func rewardV(t testing.TB, v string) string {
	t.Helper()
	base := build(t, "rewardv", "")
	key := "rewardv|" + v
	r, _ := builds.LoadOrStore(key, &buildResult{})
	b := r.(*buildResult)
	b.once.Do(func() {
		// One build, a copy per version: the version is a trailer the
		// plugin reads from its own binary (a link per version took most
		// of this package's time on a loaded machine).
		out := filepath.Join(binDir, "rewardv-"+safeName(v))
		data, err := os.ReadFile(base)
		if err == nil {
			data = append(data, "\nagentenv-test-version="+v+"\n"...)
			err = os.WriteFile(out, data, 0o755)
		}
		b.path, b.err = out, err
	})
	if b.err != nil {
		t.Fatalf("rewardv %s: %v", v, b.err)
	}
	return b.path
}

// install copies src into dir as name (executable), through a temp file
// and a rename, as a package manager replaces a binary.
func install(t testing.TB, src, dir, name string) string {
	t.Helper()
	dst := filepath.Join(dir, name)
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(dir, ".install-*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(tmp, in); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// newHost makes a host searching only dir, with no built-ins unless
// builtins names some (served by selfExe).
func newHost(t testing.TB, dir string, mod func(*Options)) *Host {
	t.Helper()
	opts := Options{
		Logger:       hclog.New(&hclog.LoggerOptions{Name: t.Name(), Output: testWriter{t}, Level: hclog.Info}),
		SelfExe:      filepath.Join(dir, "agentenv"),
		SearchPath:   []string{dir},
		Builtins:     []string{},
		CachePath:    filepath.Join(t.TempDir(), "cache.json"),
		PollInterval: 50 * time.Millisecond,
		StartTimeout: 2 * time.Minute, // a guard: starts take seconds on a loaded machine
	}
	if mod != nil {
		mod(&opts)
	}
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return h
}

// testWriter sends host logs to the test log, and nowhere once the test
// has finished.
type testWriter struct{ t testing.TB }

var logMu sync.Mutex

func (w testWriter) Write(p []byte) (int, error) {
	logMu.Lock()
	defer logMu.Unlock()
	defer func() { _ = recover() }() // logging after the test ended panics
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// ctxTimeout is a context for a test's plugin calls, cancelled when it ends.
// d is a guard, never under five minutes: a starved machine (make
// test-stress beside other work) once ran a 60 s context out across nine
// subtests, each plugin start then given 1 ms.
func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), max(d, 5*time.Minute))
	t.Cleanup(cancel)
	return ctx
}

// startRewardV1 installs reward plugin v1 as agentenv-reward-v, starts a
// host on it (mod, if not nil, adjusts its options) and returns the host,
// the plugin and a context for the test's calls.
func startRewardV1(t *testing.T, mod func(*Options)) (*Host, reward.Combiner, context.Context) {
	t.Helper()
	dir := t.TempDir()
	install(t, rewardV(t, "v1"), dir, "agentenv-reward-v")
	h := newHost(t, dir, mod)
	ctx := ctxTimeout(t, 60*time.Second)
	r, err := h.Reward(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	return h, r, ctx
}
