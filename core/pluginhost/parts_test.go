package pluginhost

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk"
)

func TestParseID(t *testing.T) {
	tests := []struct {
		id   string
		kind sdk.Kind
		name string
		ok   bool
	}{
		{"reward-mean", sdk.KindReward, "mean", true},
		{"reward/mean", sdk.KindReward, "mean", true},
		{"toolformat-qwen3coder", sdk.KindToolFormat, "qwen3coder", true},
		{"sandbox-my-docker_2.1", sdk.KindSandbox, "my-docker_2.1", true},
		{"reward-", "", "", false},
		{"reward-Mean", "", "", false},
		{"reward--x", "", "", false},
		{"rewards-x", "", "", false},
		{"mean", "", "", false},
		{"reward-a/b", "", "", false},
	}
	for _, tc := range tests {
		kind, name, ok := ParseID(tc.id)
		if kind != tc.kind || name != tc.name || ok != tc.ok {
			t.Errorf("ParseID(%q) = %q, %q, %v; want %q, %q, %v", tc.id, kind, name, ok, tc.kind, tc.name, tc.ok)
		}
	}
}

func TestBackoff(t *testing.T) {
	want := []time.Duration{0, 0, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}
	for n, w := range want {
		if got := backoff(n); got != w {
			t.Errorf("backoff(%d) = %s, want %s", n, got, w)
		}
	}
	if got := backoff(100); got != 30*time.Second {
		t.Errorf("backoff(100) = %s, want the 30s cap", got)
	}
}

func TestConfigSchema(t *testing.T) {
	const schema = `{"type":"object","properties":{"scale":{"type":"number"},
		"tags":{"type":"array","items":{"type":"string"}}},"required":["scale"],"additionalProperties":false}`
	tests := []struct {
		name, schema, config string
		wantErr              string // "" = valid
	}{
		{"valid", schema, `{"scale": 2}`, ""},
		{"wrong type", schema, `{"scale": "2"}`, `at "/scale": got string, want number`},
		{"nested", schema, `{"scale": 1, "tags": ["a", 3]}`, `at "/tags/1": got number, want string`},
		{"missing", schema, `{}`, `at "(top level)": missing property 'scale'`},
		{"absent config is {}", schema, ``, `missing property 'scale'`},
		{"extra", schema, `{"scale": 1, "x": 0}`, `at "(top level)": unknown key "x"; the keys are scale, tags`},
		{"extra, near a key", schema, `{"scale": 1, "sacle": 0}`, `unknown key "sacle"; did you mean "scale"?; the keys are scale, tags`},
		{"extra, nested", `{"type":"object","properties":{"net":{"type":"object","properties":{"cidr":{"type":"string"}},"additionalProperties":false}}}`,
			`{"net": {"cdir": "x"}}`, `at "/net": unknown key "cdir"; did you mean "cidr"?; the keys are cidr`},
		{"not JSON", schema, `{"scale":`, "config is not JSON"},
		{"no schema, no config", "", ``, ""},
		{"no schema, null", "", `null`, ""},
		{"no schema, {}", "", `{}`, ""},
		{"no schema, some config", "", `{"a":1}`, "takes no configuration"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := compileSchema(json.RawMessage(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			err = cs.validate(json.RawMessage(tc.config))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
	for _, bad := range []string{`{"type": 12}`, `not json`, `{"$ref": "#/nowhere"}`} {
		if _, err := compileSchema(json.RawMessage(bad)); err == nil {
			t.Errorf("schema %s compiled", bad)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("schema error is not one line: %q", err)
		}
	}
}

func TestDescribeStartError(t *testing.T) {
	tests := []struct {
		err, stderr, want string
	}{
		{"Unrecognized remote plugin message: hello\nThis usually means ...", "", `not an agentenv plugin: it printed "hello" on stdout`},
		{"Unrecognized remote plugin message: \nFailed to read any lines from plugin's stdout", "boom\n", `exited before the plugin handshake (last stderr line: "boom")`},
		{"plugin exited before we could connect", "This binary is a plugin. These are not meant to be executed directly.\nPlease ...", "handshake cookie mismatch"},
		{"incompatible API version with plugin. Plugin version: 4, Client versions: [3 2]", "", "no common protocol version: Plugin version: 4, Client versions: [2 3]; the plugin was built against a newer agentenv SDK (protocol 4): upgrade agentenv"},
		{"incompatible API version with plugin. Plugin version: 1, Client versions: [2 3]", "", "no common protocol version: Plugin version: 1, Client versions: [2 3]; the plugin was built against an older agentenv SDK (protocol 1): rebuild it"},
		{"timeout while waiting for plugin to start", "", "no plugin handshake within 1s"},
		{"fork/exec /x: exec format error", "", "fork/exec /x: exec format error"},
	}
	for _, tc := range tests {
		got := describeStartError(errors.New(tc.err), tc.stderr, time.Second)
		if !strings.HasPrefix(got, tc.want) || strings.Contains(got, "\n") {
			t.Errorf("describeStartError(%q) = %q, want prefix %q on one line", tc.err, got, tc.want)
		}
	}
}

func TestDiscoverOrderAndOverride(t *testing.T) {
	first, second, self := t.TempDir(), t.TempDir(), t.TempDir()
	mk := func(dir, name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := mk(first, "agentenv-reward-a", 0o755)
	mk(second, "agentenv-reward-a", 0o755) // shadowed by first
	b := mk(second, "agentenv-toolformat-b", 0o755)
	c := mk(second, "agentenv-reward-mean", 0o755) // overrides the built-in
	mk(second, "agentenv-reward-noexec", 0o644)
	mk(second, "agentenv-weird-x", 0o755)
	mk(second, "agentenv-reward-", 0o755)
	mk(second, "other", 0o755)
	if err := os.Mkdir(filepath.Join(second, "agentenv-reward-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	selfExe := filepath.Join(self, "agentenv")
	h := &Host{searchPath: []string{filepath.Join(first, "missing"), first, second}, selfExe: selfExe,
		builtins: []string{"reward-mean", "sandbox-local"}, log: newHost(t, t.TempDir(), nil).log}

	type row struct{ id, source, problem string }
	var got []row
	for _, c := range h.discover() {
		got = append(got, row{c.id(), c.source(), c.problem})
	}
	want := []row{
		{"reward-a", a, ""},
		{"reward-dir", filepath.Join(second, "agentenv-reward-dir"), "not a regular file"},
		{"reward-mean", c, ""},
		{"reward-noexec", filepath.Join(second, "agentenv-reward-noexec"), "not executable (chmod +x it)"},
		{"sandbox-local", SourceBuiltin, ""},
		{"toolformat-b", b, ""},
	}
	if len(got) != len(want) {
		t.Fatalf("discover = %v\nwant %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("discover[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	if _, err := h.resolve(sdk.KindReward, "nope"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "(reward plugins: a, dir, mean, noexec)") {
		t.Errorf("resolve(nope) = %v", err)
	}
}

func TestDefaultSearchPath(t *testing.T) {
	t.Setenv(PathEnv, "/a:/b::/c")
	t.Setenv("HOME", "/home/u")
	got := DefaultSearchPath("/opt/agentenv/bin/agentenv")
	want := []string{"/a", "/b", "/c", "/home/u/.agentenv/plugins", "/opt/agentenv/bin"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("DefaultSearchPath = %v, want %v", got, want)
	}
}

func TestFingerprintCacheFile(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.WriteFile(bin, []byte("one"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "cache", "plugins.json")
	f := loadFingerprints(path)
	sum, _, err := f.hash(bin)
	if err != nil || sum != "7692c3ad3540bb803c020b3aee66cd8887123234ea0c6e7143c0add73ff431ed" {
		t.Fatalf("hash = %q, %v", sum, err)
	}
	f.setInfo(sum, []string{"plugin-serve", "reward-x"}, sdk.Info{Name: "x", Version: "9"})
	f.setInfo("deadbeef", nil, sdk.Info{Name: "orphan"})
	if err := f.save(); err != nil {
		t.Fatal(err)
	}
	g := loadFingerprints(path)
	if i, ok := g.info(sum, []string{"plugin-serve", "reward-x"}); !ok || i.Version != "9" || i.ConfigSchema != nil {
		// A schema-less Info must stay schema-less (not "null"): inspect
		// says "takes no configuration" for it.
		t.Fatalf("reloaded info = %+v, %v", i, ok)
	}
	if _, ok := g.info("deadbeef", nil); ok {
		t.Fatal("an Info no file refers to was kept")
	}
	if _, ok := g.info(sum, nil); ok {
		t.Fatal("Info found under other arguments")
	}
	// No temp files are left beside the cache.
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("cache folder holds %d files, want 1", len(entries))
	}
	// A changed file is hashed again (a later mtime set outright: a write
	// within the clock's granularity may keep the old one).
	if err := os.WriteFile(bin, []byte("two"), 0o755); err != nil {
		t.Fatal(err)
	}
	if later := time.Now().Add(time.Hour); os.Chtimes(bin, later, later) != nil {
		t.Fatal("chtimes failed")
	}
	if sum2, _, _ := g.hash(bin); sum2 == sum {
		t.Fatal("changed file kept its old hash")
	}
}

func TestPluginEnv(t *testing.T) {
	h := &Host{opts: Options{EnvAllow: []string{"AWS_*", "LANG"}, PluginEnv: map[string][]string{"sandbox-ecs": {"ECS_CLUSTER"}}},
		environ: func() []string {
			return []string{"PATH=/bin", "HOME=/h", "SECRET=x", "AWS_REGION=r", "LANG=C", "ECS_CLUSTER=c", "TMPDIR=/t", "LANGUAGE=en"}
		}, sockDir: "/s"}
	tests := []struct {
		id     string
		config string
		want   string
	}{
		{"reward-mean", "", "PATH=/bin HOME=/h AWS_REGION=r LANG=C TMPDIR=/t PLUGIN_UNIX_SOCKET_DIR=/s"},
		{"sandbox-ecs", "", "PATH=/bin HOME=/h AWS_REGION=r LANG=C ECS_CLUSTER=c TMPDIR=/t PLUGIN_UNIX_SOCKET_DIR=/s"},
		{"sandbox-local", `{"pass_env": ["SECRET", "LANGU*"]}`, "PATH=/bin HOME=/h SECRET=x AWS_REGION=r LANG=C TMPDIR=/t LANGUAGE=en PLUGIN_UNIX_SOCKET_DIR=/s"},
		{"sandbox-local", `{"pass_env": "SECRET"}`, "PATH=/bin HOME=/h AWS_REGION=r LANG=C TMPDIR=/t PLUGIN_UNIX_SOCKET_DIR=/s"},
		{"sandbox-local", `[1]`, "PATH=/bin HOME=/h AWS_REGION=r LANG=C TMPDIR=/t PLUGIN_UNIX_SOCKET_DIR=/s"},
	}
	for _, tc := range tests {
		if got := strings.Join(h.pluginEnv(tc.id, passEnvOf(json.RawMessage(tc.config))), " "); got != tc.want {
			t.Errorf("pluginEnv(%s) = %q, want %q", tc.id, got, tc.want)
		}
	}
}

// The socket folder of a host that no longer runs is removed by the next
// host; a running host's, and anything not named like one, stays.
func TestSweepSockDirs(t *testing.T) {
	tmp := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadPid := dead.ProcessState.Pid()
	mk := func(name string) string {
		d := filepath.Join(tmp, name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		return d
	}
	gone := mk(fmt.Sprintf("%s%d-123", sockDirPrefix, deadPid))
	live := mk(fmt.Sprintf("%s%d-456", sockDirPrefix, os.Getppid()))
	own := mk(fmt.Sprintf("%s%d-789", sockDirPrefix, os.Getpid()))
	other := mk(sockDirPrefix + "notapid-1")
	sweepSockDirs(tmp)
	for d, want := range map[string]bool{gone: false, live: true, own: true, other: true} {
		_, err := os.Stat(d)
		if exists := err == nil; exists != want {
			t.Errorf("%s exists = %v after the sweep, want %v", filepath.Base(d), exists, want)
		}
	}
}
