package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

// The SDK's conformance suite, run as any third-party plugin runs it, with
// the network shared and off: prepare once, deploy, reachable, no secret in
// the handle, listed by labels, exec, terminate through a fresh instance
// with only the handle, gone, and the errors for unknown handles.
func TestConformance(t *testing.T) {
	needBwrap(t)
	for _, network := range []bool{true, false} {
		t.Run(fmt.Sprintf("network=%v", network), func(t *testing.T) {
			dir := stateDir(t)
			fresh := func() sandbox.Plugin { return newTestPlugin(t, dir, map[string]any{"network": network}) }
			builds := filepath.Join(t.TempDir(), "builds")
			spec := testSpec()
			spec.Build = []string{"sh", "-c", "echo built >> " + builds}
			sdktest.SandboxConformance(t, fresh(), sdktest.SandboxCase{
				Spec:        spec,
				ExecCommand: []string{"sh", "-c", `echo "port=$AGENTENV_PORT home=$HOME"; pwd`},
				ExecStdout:  "home=/agentenv/work",
				Restart:     fresh,
				PrepareCount: func() int {
					data, _ := os.ReadFile(builds)
					return strings.Count(string(data), "built")
				},
			})
		})
	}
}

// The schema the host checks configurations against and the struct
// Configure fills name the same settings.
func TestConfigSchemaMatchesStruct(t *testing.T) {
	sdktest.ConfigSchemaMatches(t, newPlugin().Info().ConfigSchema, Config{})
	sdktest.ConfigSchemaMatches(t, []byte(`{"type": "object", "additionalProperties": false, "properties": `+limitsProperties(t)+`}`), Limits{})
}

// limitsProperties is the properties of the schema's "limits" object.
func limitsProperties(t *testing.T) string {
	t.Helper()
	var doc struct {
		Properties map[string]struct {
			Properties json.RawMessage `json:"properties"`
		} `json:"properties"`
	}
	if err := json.Unmarshal([]byte(configSchema), &doc); err != nil {
		t.Fatal(err)
	}
	return string(doc.Properties["limits"].Properties)
}

// Bad configurations are refused with an error naming the setting.
func TestConfigureRefuses(t *testing.T) {
	long := "/" + strings.Repeat("x", 100)
	for _, tc := range []struct {
		config string
		want   string
	}{
		{`{"netwrok": false}`, `unknown setting "netwrok"; the settings are: binds, build_timeout, bwrap, grace, hide, limits, log_max_mb, network, pass_env, ready_timeout, state_dir`},
		{`{"grace": 5}`, `grace: 5: a duration is a string with a unit, like "5s"`},
		{`{"limits": {"open_file": 10}}`, `limits: unknown field "open_file"`},
		{`{"binds": ["data"]}`, `binds: "data": want /host/path or /host/path:/path/in/sandbox, both absolute`},
		{`{"binds": ["/no/such/dir"]}`, `binds: "/no/such/dir": stat /no/such/dir: no such file or directory`},
		{`{"binds": ["/etc:/tmp/etc"]}`, `binds: "/etc:/tmp/etc": /tmp/etc is set up by the sandbox itself`},
		{`{"binds": ["/etc:/usr/no/such/dir"]}`, `/usr/no/such/dir does not exist, and cannot be made inside the read-only /usr`},
		{`{"hide": ["home"]}`, `hide: "home" is not an absolute path`},
		{`{"state_dir": "` + long + `"}`, `is too long: sandboxes' socket paths would be`},
		{`{"ready_timeout": "0s"}`, `ready_timeout and build_timeout must be positive`},
		{`{"pass_env": ["A=B"]}`, `pass_env entry "A=B" is not a variable name`},
	} {
		err := newPlugin().Configure(context.Background(), json.RawMessage(tc.config))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "sandbox-bwrap config: ") {
			t.Errorf("Configure(%s) = %v, want an error containing %q", tc.config, err, tc.want)
		}
	}
	good := `{"network": false, "binds": ["/etc:/data/etc"], "hide": ["/run"], "limits": {"open_files": 64}, "grace": "1s"}`
	p := newPlugin()
	if err := p.Configure(context.Background(), json.RawMessage(good)); err != nil {
		t.Fatalf("Configure(%s): %v", good, err)
	}
	if cfg := p.config(); cfg.Network || cfg.Limits.OpenFiles != 64 || cfg.Limits.FileSizeMB != 1024 {
		t.Errorf("config after %s = %+v; want network off, open_files 64 and the default file_size_mb", good, cfg)
	}
}
