package pluginhost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/sdk"
)

func TestRewardThroughPlugin(t *testing.T) {
	dir := t.TempDir()
	install(t, rewardV(t, "v1"), dir, "agentenv-reward-v")
	h := newHost(t, dir, nil)

	tests := []struct {
		name    string
		config  string
		scores  map[string]float64
		want    float64
		wantErr []string // substrings of the error, all of them
	}{
		{name: "no config", scores: map[string]float64{"a": 1, "b": 0}, want: 0.5},
		{name: "scaled", config: `{"scale": 4}`, scores: map[string]float64{"a": 1, "b": 0}, want: 2},
		{name: "same config other spelling", config: "{ \"scale\":4 }", scores: map[string]float64{"a": 1}, want: 4},
		{name: "plugin's own error passes through", scores: map[string]float64{}, wantErr: []string{"no scores"}},
		{name: "wrong type", config: `{"scale": "big"}`, wantErr: []string{"plugin reward-v", `at "/scale"`, "want number"}},
		{name: "unknown field", config: `{"scael": 2}`, wantErr: []string{"plugin reward-v", "scael"}},
		{name: "out of range", config: `{"scale": 0}`, wantErr: []string{"plugin reward-v", `at "/scale"`}},
		{name: "not JSON", config: `{"scale": `, wantErr: []string{"plugin reward-v", "config is not JSON"}},
		{name: "not found", config: "", wantErr: []string{`reward plugin "nope" not found (reward plugins: v)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := "v"
			if tc.name == "not found" {
				name = "nope"
			}
			ctx := ctxTimeout(t, time.Minute) // each subtest its own
			r, err := h.Reward(ctx, name, json.RawMessage(tc.config))
			if err == nil {
				_, err = r.Combine(ctx, tc.scores)
				if err == nil && tc.wantErr == nil {
					got, _ := r.Combine(ctx, tc.scores)
					if got != tc.want {
						t.Fatalf("Combine = %v, want %v", got, tc.want)
					}
					if v := r.(sdk.Informer).Info().Version; v != "v1" {
						t.Fatalf("Info().Version = %q, want v1", v)
					}
					return
				}
			}
			if tc.wantErr == nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if err == nil {
				t.Fatalf("no error, want one containing %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q does not contain %q", err, want)
				}
			}
		})
	}
	// The two configs that differ only in spacing share one process.
	if n := len(h.running()); n != 2 {
		t.Fatalf("running slots = %d, want 2 (no config, scale 4)", n)
	}
}

// Every way a binary can fail to be a plugin gives one clear line in
// List and a refusal naming the plugin when it is used.
func TestBadPlugins(t *testing.T) {
	dir := t.TempDir()
	install(t, rewardV(t, "v1"), dir, "agentenv-reward-v")
	bad := build(t, "misbehave", "")
	for _, how := range []string{"badcookie", "badversion", "oldversion", "crash", "badschema", "wrongkind"} {
		install(t, bad, dir, "agentenv-reward-"+how)
	}
	write := func(name, text string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("agentenv-reward-script", "#!/bin/sh\necho hello from a shell script\n", 0o755)
	write("agentenv-reward-noexec", "not a program", 0o644)
	write("agentenv-frobnicator-x", "unknown kind: ignored", 0o755)
	write("README.md", "not a plugin name: ignored", 0o644)

	h := newHost(t, dir, nil)
	ctx := ctxTimeout(t, 120*time.Second)
	want := map[string]string{
		"v":          "ok",
		"badcookie":  "failed: handshake cookie mismatch",
		"badversion": "failed: no common protocol version: Plugin version: 99, Client versions: [2 3]; the plugin was built against a newer agentenv SDK (protocol 99): upgrade agentenv",
		"oldversion": "failed: no common protocol version: Plugin version: 1, Client versions: [2 3]; the plugin was built against an older agentenv SDK (protocol 1): rebuild it against this agentenv's sdk/ (protocol 3",
		"crash":      `failed: exited before the plugin handshake (last stderr line: "fatal: cannot load the reward model")`,
		"badschema":  "failed: config schema does not compile",
		"wrongkind":  "failed: its Info says it is toolformat-wrongkind, but it was found as reward-wrongkind",
		"script":     `failed: not an agentenv plugin: it printed "hello from a shell script" on stdout instead of the plugin handshake`,
		"noexec":     "failed: not executable",
	}
	entries, err := h.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		w, ok := want[e.Name]
		if !ok {
			t.Errorf("unexpected entry %+v", e)
			continue
		}
		seen[e.Name] = true
		if !strings.HasPrefix(e.Status, w) {
			t.Errorf("%s: status %q, want prefix %q", e.Name, e.Status, w)
		}
		if strings.ContainsAny(e.Status, "\n\r") {
			t.Errorf("%s: status is not one line: %q", e.Name, e.Status)
		}
		if e.Kind != sdk.KindReward || e.Source != filepath.Join(dir, "agentenv-reward-"+e.Name) {
			t.Errorf("%s: kind %q source %q", e.Name, e.Kind, e.Source)
		}
		if e.OK() != (e.Name == "v") {
			t.Errorf("%s: OK() = %v", e.Name, e.OK())
		}
		if e.Name != "noexec" && len(e.SHA256) != 64 {
			t.Errorf("%s: sha256 %q", e.Name, e.SHA256)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("listed %v, want %d entries", seen, len(want))
	}
	for name, w := range want {
		if name == "v" {
			continue
		}
		_, err := h.Reward(ctx, name, nil)
		if err == nil {
			t.Errorf("%s: Reward succeeded", name)
			continue
		}
		reason := strings.TrimPrefix(w, "failed: ")
		if !strings.Contains(err.Error(), "plugin reward-"+name) || !strings.Contains(err.Error(), reason) {
			t.Errorf("%s: error %q, want the plugin named and %q", name, err, reason)
		}
	}
	if n := len(h.running()); n != 0 {
		t.Errorf("%d failed plugins left running", n)
	}
}

func TestListCachesFingerprints(t *testing.T) {
	dir := t.TempDir()
	install(t, rewardV(t, "v1"), dir, "agentenv-reward-v")
	cache := filepath.Join(t.TempDir(), "sub", "plugins.json")
	ctx := ctxTimeout(t, 60*time.Second)
	listV := func(h *Host) Entry {
		t.Helper()
		es, err := h.List(ctx)
		if err != nil || len(es) != 1 || !es[0].OK() {
			t.Fatalf("List = %+v, %v", es, err)
		}
		return es[0]
	}

	h1 := newHost(t, dir, func(o *Options) { o.CachePath = cache })
	if e := listV(h1); e.Version != "v1" || string(e.Info.ConfigSchema) == "" {
		t.Fatalf("entry %+v", e)
	}
	listV(h1)
	if n := h1.starts.Load(); n != 1 {
		t.Fatalf("two lists launched %d processes, want 1", n)
	}
	// A new host (a new `agentenv plugins list`) reads the cache file.
	h2 := newHost(t, dir, func(o *Options) { o.CachePath = cache })
	listV(h2)
	if n := h2.starts.Load(); n != 0 {
		t.Fatalf("list with a warm cache file launched %d processes", n)
	}
	// A changed binary is launched again.
	install(t, rewardV(t, "v2"), dir, "agentenv-reward-v")
	if e := listV(h2); e.Version != "v2" || h2.starts.Load() != 1 {
		t.Fatalf("after replacing the binary: %+v, %d starts", e, h2.starts.Load())
	}
	// A corrupt cache only costs a launch.
	if err := os.WriteFile(cache, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	h3 := newHost(t, dir, func(o *Options) { o.CachePath = cache })
	if e := listV(h3); e.Version != "v2" {
		t.Fatalf("with a corrupt cache: %+v", e)
	}
}

func TestBuiltinOverriddenByBinary(t *testing.T) {
	self := t.TempDir()
	ext := t.TempDir()
	// The "agentenv" binary here is the test plugin, which ignores the
	// `plugin-serve reward-v` arguments a built-in is started with.
	install(t, rewardV(t, "v1"), self, "agentenv")
	h := newHost(t, self, func(o *Options) {
		o.SearchPath = []string{ext}
		o.Builtins = []string{"reward-v"}
	})
	ctx := ctxTimeout(t, 60*time.Second)

	es, err := h.List(ctx)
	if err != nil || len(es) != 1 || es[0].Source != SourceBuiltin || es[0].Version != "v1" || !es[0].OK() {
		t.Fatalf("List = %+v, %v; want the built-in v1", es, err)
	}
	r, err := h.Reward(ctx, "reward-v", nil) // the full id works too
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.Combine(ctx, map[string]float64{"version": 0}); err != nil || got != 1 {
		t.Fatalf("built-in Combine = %v, %v", got, err)
	}

	install(t, rewardV(t, "v2"), ext, "agentenv-reward-v")
	es, err = h.List(ctx)
	if err != nil || len(es) != 1 || es[0].Source != filepath.Join(ext, "agentenv-reward-v") || es[0].Version != "v2" {
		t.Fatalf("List = %+v, %v; want the external v2", es, err)
	}
	// Reload moves the running plugin onto the override.
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Combine(ctx, map[string]float64{"version": 0}); err != nil || got != 2 {
		t.Fatalf("after reload Combine = %v, %v; want version 2", got, err)
	}
}

func TestInspect(t *testing.T) {
	dir := t.TempDir()
	install(t, rewardV(t, "v3"), dir, "agentenv-reward-v")
	h := newHost(t, dir, nil)
	ctx := ctxTimeout(t, 60*time.Second)
	for _, id := range []string{"reward-v", "reward/v", "v"} {
		e, err := h.Inspect(ctx, id)
		if err != nil || e.ID() != "reward-v" || e.Version != "v3" || !strings.Contains(string(e.Info.ConfigSchema), "scale") {
			t.Fatalf("Inspect(%q) = %+v, %v", id, e, err)
		}
	}
	if _, err := h.Inspect(ctx, "toolformat-v"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Inspect(toolformat-v) error = %v, want ErrNotFound", err)
	}
}

func TestPluginEnvironmentIsAllowListed(t *testing.T) {
	dir := t.TempDir()
	install(t, rewardV(t, "v1"), dir, "agentenv-reward-v")
	t.Setenv("AGENTENV_TEST_SECRET", "s3cret")
	t.Setenv("AGENTENV_TEST_OPEN", "1")
	tests := []struct {
		name   string
		opts   func(*Options)
		probe  string
		want   float64
		config string
	}{
		{"host env is not inherited", nil, "env:AGENTENV_TEST_SECRET", 0, ""},
		{"PATH is passed", nil, "env:PATH", 1, ""},
		{"allowed by name", func(o *Options) { o.EnvAllow = []string{"AGENTENV_TEST_OPEN"} }, "env:AGENTENV_TEST_OPEN", 1, ""},
		{"allowed by name, others not", func(o *Options) { o.EnvAllow = []string{"AGENTENV_TEST_OPEN"} }, "env:AGENTENV_TEST_SECRET", 0, ""},
		{"allowed by prefix", func(o *Options) { o.EnvAllow = []string{"AGENTENV_TEST_*"} }, "env:AGENTENV_TEST_SECRET", 1, ""},
		{"allowed for this plugin", func(o *Options) { o.PluginEnv = map[string][]string{"reward-v": {"AGENTENV_TEST_SECRET"}} }, "env:AGENTENV_TEST_SECRET", 1, ""},
		{"allowed for another plugin", func(o *Options) { o.PluginEnv = map[string][]string{"reward-w": {"AGENTENV_TEST_SECRET"}} }, "env:AGENTENV_TEST_SECRET", 0, ""},
		{"allowed by the plugin's config", nil, "env:AGENTENV_TEST_SECRET", 1, `{"pass_env": ["AGENTENV_TEST_SECRET"]}`},
		{"config allows another", nil, "env:AGENTENV_TEST_SECRET", 0, `{"pass_env": ["AGENTENV_TEST_OPEN"]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t, dir, tc.opts)
			ctx := ctxTimeout(t, time.Minute) // each subtest its own
			r, err := h.Reward(ctx, "v", json.RawMessage(tc.config))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := r.Combine(ctx, map[string]float64{tc.probe: 0}); err != nil || got != tc.want {
				t.Fatalf("%s = %v, %v; want %v", tc.probe, got, err, tc.want)
			}
		})
	}
}

// A plugin's hclog lines land in the host's log under the plugin's name.
func TestPluginLogsReachHostLog(t *testing.T) {
	dir := t.TempDir()
	install(t, rewardV(t, "v7"), dir, "agentenv-reward-v")
	var buf syncBuffer
	h := newHost(t, dir, func(o *Options) {
		o.Logger = hclog.New(&hclog.LoggerOptions{Name: "agentenv", Output: &buf, Level: hclog.Info})
	})
	ctx := ctxTimeout(t, 60*time.Second)
	if _, err := h.Reward(ctx, "v", json.RawMessage(`{"scale": 2}`)); err != nil {
		t.Fatal(err)
	}
	// The plugin logs JSON, so its key/value pairs reach the host in no
	// fixed order: look for the line, then for each pair on it.
	want := "[INFO]  agentenv.plugins.reward-v: configured:"
	wait.Until(t, fmt.Sprintf("the host log line %q with scale=2 version=v7", want), func() bool {
		for _, line := range strings.Split(buf.String(), "\n") {
			if strings.Contains(line, want) && strings.Contains(line, " scale=2") && strings.Contains(line, " version=v7") {
				return true
			}
		}
		return false
	})
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Messages over gRPC's 4 MiB default cross between host and plugin.
func TestLargeCallThroughHost(t *testing.T) {
	_, r, ctx := startRewardV1(t, nil)
	scores := make(map[string]float64, 300000)
	for i := range 300000 {
		scores[fmt.Sprintf("verifier-step-%07d", i)] = 1
	}
	if _, err := r.Combine(ctx, scores); err != nil {
		t.Fatalf("Combine of %d scores (about 8 MiB): %v", len(scores), err)
	}
}

// A built-in linked under another name of a first-party plugin would never
// be reached (users' names resolve to the canonical one): the host refuses
// to start, naming the name to register; a bad id is refused too.
func TestNewRefusesBuiltinIDs(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want []string
	}{
		{"toolformat-qwen3coder", []string{`built-in plugin toolformat-qwen3coder is registered under "qwen3coder", another name of toolformat-qwen3_coder`, `register it as "qwen3_coder"`}},
		{"toolformat-qwen3-coder", []string{`another name of toolformat-qwen3_coder`}},
		{"nokind", []string{`built-in plugin "nokind" is not a <kind>-<name> id`}},
	} {
		_, err := New(Options{SelfExe: "/nonexistent/agentenv", SearchPath: []string{}, Builtins: []string{tc.id}, CachePath: "-"})
		if err == nil {
			t.Errorf("New with built-in %s: no error", tc.id)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("New with built-in %s: %v; want %q", tc.id, err, w)
			}
		}
	}
	// The canonical name and a plugin of another kind under that spelling are fine.
	for _, id := range []string{"toolformat-qwen3_coder", "reward-qwen3coder"} {
		h, err := New(Options{SelfExe: "/nonexistent/agentenv", SearchPath: []string{}, Builtins: []string{id}, CachePath: "-"})
		if err != nil {
			t.Errorf("New with built-in %s: %v", id, err)
			continue
		}
		h.Close()
	}
}
