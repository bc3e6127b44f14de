package cli

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestReadServeConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.toml", `
[serve]
addr = "127.0.0.1:9000"
reward = "mean"
max_concurrent_envs = 8
idle_timeout = "90s"
token_var = "TOK"
log_json = true
max_reply_errors = 5
http_idle_timeout = "5s"
[serve.sandbox_config]
grace = "1s"

[skyrl]
anything = 1
`)
	o, err := readServeConfig(good)
	if err != nil {
		t.Fatal(err)
	}
	want := defaultServeOptions()
	want.Addr, want.Reward, want.MaxConcurrentEnvs, want.IdleTimeout, want.TokenVar, want.LogJSON =
		"127.0.0.1:9000", "mean", 8, 90*time.Second, "TOK", true
	want.SandboxConfig = map[string]any{"grace": "1s"}
	want.Limits.MaxReplyErrors, want.Limits.HTTPIdleTimeout = 5, 5*time.Second
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("got %+v\nwant %+v", o, want)
	}
	for _, tc := range []struct{ name, body, err string }{
		{"unknown key", "[serve]\nport = 1\n", `unknown key "port"`},
		{"bad duration", "[serve]\nidle_timeout = \"soon\"\n", "idle_timeout"},
		{"wrong type", "[serve]\nmax_concurrent_envs = \"many\"\n", "max_concurrent_envs"},
		{"not toml", "[serve\n", "line 1"},
		{"limit not a number", "[serve]\nmax_calls_per_reply = \"lots\"\n", "max_calls_per_reply: want a whole number"},
		{"limit not a duration", "[serve]\nhttp_read_timeout = 5\n", `http_read_timeout 5: want a duration like "30s"`},
	} {
		if _, err := readServeConfig(write(tc.name+".toml", tc.body)); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.err)
		}
	}
	if _, err := readServeConfig(filepath.Join(dir, "missing.toml")); err == nil {
		t.Error("missing file accepted")
	}
}

func TestMergeServeOptions(t *testing.T) {
	file := defaultServeOptions()
	file.Addr, file.MaxConcurrentEnvs = "127.0.0.1:9000", 8
	flags := defaultServeOptions()
	file.Limits.MaxReplyErrors, file.Limits.MaxCallsPerReply = 7, 9
	flags.MaxConcurrentEnvs = 3
	flags.Limits.MaxReplyErrors = 2
	changed := func(name string) bool { return name == "max-concurrent-envs" || name == "max-reply-errors" }
	got := mergeServeOptions(file, flags, changed)
	if got.Addr != "127.0.0.1:9000" || got.MaxConcurrentEnvs != 3 || got.Limits.MaxReplyErrors != 2 || got.Limits.MaxCallsPerReply != 9 {
		t.Fatalf("got %+v", got)
	}
	bad := defaultServeOptions().Limits
	bad.MaxArgumentValues = 0
	if err := bad.check(); err == nil || !strings.Contains(err.Error(), "--max-argument-values must be at least 1") {
		t.Errorf("check of a zero limit: %v", err)
	}
}

func TestParseSandboxConfig(t *testing.T) {
	dir := t.TempDir()
	js := filepath.Join(dir, "c.json")
	os.WriteFile(js, []byte(`{"grace":"2s","pass_env":["HOME"]}`), 0o644)
	tm := filepath.Join(dir, "c.toml")
	os.WriteFile(tm, []byte("state_dir = \"/tmp/s\"\n"), 0o644)
	got, err := parseSandboxConfig([]string{js, "grace=3s", "n=4", `list=["a"]`, tm, "flag=true"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"grace": "3s", "pass_env": []any{"HOME"}, "n": 4.0, "list": []any{"a"}, "state_dir": "/tmp/s", "flag": true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	for _, tc := range []struct{ v, err string }{
		{filepath.Join(dir, "nope.json"), "neither key=value nor a readable file"},
		{"=x", "neither key=value"},
	} {
		if _, err := parseSandboxConfig([]string{tc.v}); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: got %v", tc.v, err)
		}
	}
	bad := filepath.Join(dir, "c.yaml")
	os.WriteFile(bad, []byte("a: 1"), 0o644)
	if _, err := parseSandboxConfig([]string{bad}); err == nil || !strings.Contains(err.Error(), ".json or .toml") {
		t.Errorf("yaml: %v", err)
	}
}
