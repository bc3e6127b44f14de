package cli

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// serveFlags are serve's settings and flags, parsed from args.
func serveFlags(t *testing.T, args ...string) (*serveOptions, *pflag.FlagSet) {
	t.Helper()
	o := defaultServeOptions()
	f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	o.addFlags(f)
	if err := f.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &o, f
}

// The [serve] table sets every flag not given on the command line, by the
// flag's name with _ for -; a key that is no flag, or a value of the
// wrong type, is an error naming it.
func TestApplyServeConfig(t *testing.T) {
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
deploy_timeout = "7m"
token_var = "TOK"
log_json = true
max_reply_errors = 5
max_calls_per_reply = 9
http_idle_timeout = "5s"
[serve.sandbox_config]
grace = "1s"

[skyrl]
anything = 1
`)
	o, f := serveFlags(t, "--max-concurrent-envs", "3", "--max-reply-errors", "2")
	sandboxConfig, err := applyServeConfig(good, f)
	if err != nil {
		t.Fatal(err)
	}
	want := defaultServeOptions()
	want.Addr, want.Reward, want.IdleTimeout, want.TokenVar, want.LogJSON = "127.0.0.1:9000", "mean", 90*time.Second, "TOK", true
	want.DeployTimeout = 7 * time.Minute
	want.MaxConcurrentEnvs, want.Limits.MaxReplyErrors = 3, 2 // given as flags: they win
	want.Limits.MaxCallsPerReply, want.Limits.HTTPIdleTimeout = 9, 5*time.Second
	if !reflect.DeepEqual(*o, want) {
		t.Fatalf("got %+v\nwant %+v", *o, want)
	}
	if !reflect.DeepEqual(sandboxConfig, map[string]any{"grace": "1s"}) {
		t.Errorf("sandbox_config: %v", sandboxConfig)
	}
	for _, tc := range []struct{ name, body, err string }{
		{"unknown key", "[serve]\nport = 1\n", `unknown key "port"; the keys are addr, deploy_timeout, error_detail, http_idle_timeout,`},
		{"flag spelling", "[serve]\nmax-connections = 1\n", `unknown key "max-connections"`},
		{"not a setting", "[serve]\nconfig = \"other.toml\"\n", `unknown key "config"`},
		{"bad duration", "[serve]\nidle_timeout = \"soon\"\n", `[serve] idle_timeout "soon": want a duration like "30s"`},
		{"wrong type", "[serve]\nmax_concurrent_envs = \"many\"\n", `[serve] max_concurrent_envs: want a whole number, got "many"`},
		{"not a bool", "[serve]\nlog_json = \"yes\"\n", `[serve] log_json "yes": want true or false`},
		{"not a string", "[serve]\naddr = 8200\n", `[serve] addr 8200: want a string`},
		{"sandbox_config not a table", "[serve]\nsandbox_config = 1\n", "sandbox_config: want a table"},
		{"serve not a table", "serve = 1\n", "serve is not a table"},
		{"not toml", "[serve\n", "line 1"},
		{"limit not a number", "[serve]\nmax_calls_per_reply = \"lots\"\n", "max_calls_per_reply: want a whole number"},
		{"limit not a duration", "[serve]\nhttp_read_timeout = 5\n", `http_read_timeout 5: want a duration like "30s"`},
	} {
		_, f := serveFlags(t)
		if _, err := applyServeConfig(write(tc.name+".toml", tc.body), f); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.err)
		}
	}
	// serve's own --config and --sandbox-config are no keys (sandbox_config
	// is a table).
	real := newServeCmd("test", ProcessEnv()).Flags()
	if _, err := applyServeConfig(write("config.toml", "[serve]\nconfig = \"x.toml\"\n"), real); err == nil ||
		!strings.Contains(err.Error(), `unknown key "config"`) {
		t.Errorf("config key: %v", err)
	}
	keys := serveTableKeys(real)
	if slices.Contains(keys, "config") || slices.Contains(keys, "help") || !slices.Contains(keys, "warm") ||
		strings.Count(strings.Join(keys, " "), "sandbox_config") != 1 {
		t.Errorf("keys of the real command: %s", keys)
	}
	if _, err := applyServeConfig(filepath.Join(dir, "missing.toml"), f); err == nil {
		t.Error("missing file accepted")
	}
}

func TestCheckLimits(t *testing.T) {
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
