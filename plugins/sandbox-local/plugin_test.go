package local

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

func TestConformance(t *testing.T) {
	raw, _ := json.Marshal(map[string]string{"state_dir": t.TempDir(), "grace": "2s"})
	fresh := func() sandbox.Plugin {
		p := New()
		p.SetLogger(hclog.NewNullLogger())
		if err := p.Configure(context.Background(), raw); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// An env that listens but speaks no MCP: readiness is the host's
	// business, so the sandbox must not wait for MCP.
	builds := filepath.Join(t.TempDir(), "builds")
	spec := sandbox.Spec{
		Env: "plain", Dir: t.TempDir(),
		Build:   []string{"sh", "-c", "echo built >> " + builds},
		Command: []string{"python3", "-c", "import os,socket,time\ns=socket.socket()\ns.bind(('127.0.0.1', int(os.environ['AGENTENV_PORT'])))\ns.listen()\ntime.sleep(600)"},
		Port:    18765,
	}
	sdktest.SandboxConformance(t, fresh(), sdktest.SandboxCase{
		Spec:        spec,
		ExecCommand: []string{"sh", "-c", `echo "port=$AGENTENV_PORT"`},
		ExecStdout:  "port=",
		Restart:     fresh,
		PrepareCount: func() int {
			data, _ := os.ReadFile(builds)
			return strings.Count(string(data), "built")
		},
	})
}

// TestPluginSubprocess drives the real plugin binary over go-plugin: a
// deploy through one plugin process is listed and terminated by a second
// one after the first is killed.
func TestPluginSubprocess(t *testing.T) {
	bin := sdktest.Build(t, "./cmd/agentenv-sandbox-local")
	stateDir := t.TempDir()
	cfg, _ := json.Marshal(map[string]string{"state_dir": stateDir, "grace": "2s", "mode": "process"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	first := sdktest.Launch(t, sdk.KindSandbox, bin).(*sandbox.Client)
	if err := first.Configure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	info, err := first.RemoteInfo(ctx)
	if err != nil || info.Name != "local" || info.Kind != sdk.KindSandbox {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	spec := testSpec("TESTENV_CHILD=1")
	spec.Labels["agentenv.episode"] = "ep-1"
	sb, err := first.Deploy(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Terminate(context.Background(), sb) })
	if err := echo(t, sb.Endpoint); err != nil {
		t.Fatal(err)
	}
	var h handle
	if err := json.Unmarshal(sb.State, &h); err != nil {
		t.Fatalf("handle over the wire: %v", err)
	}
	st, err := readState(stateDir, sb.ID)
	if err != nil || st.PID != 0 || st.Root != h.Root || h.PGID <= 0 {
		t.Fatalf("state file: %+v, %v; handle %+v", st, err, h)
	}
	if _, err := first.Deploy(ctx, sandbox.Spec{Env: "img", Image: "alpine"}); err == nil || !strings.Contains(err.Error(), "only an image") {
		t.Fatalf("image-only deploy over the wire = %v", err)
	}

	// Kill the first plugin process: its env must outlive it.
	for _, pid := range procsOf(bin) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	wait.Until(t, "the first plugin process to die", func() bool { return len(procsOf(bin)) == 0 })
	if len(groupMembers(h.PGID)) == 0 {
		t.Fatal("the env died with the plugin process")
	}

	second := sdktest.Launch(t, sdk.KindSandbox, bin).(*sandbox.Client)
	if err := second.Configure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	got, err := second.List(ctx, map[string]string{"agentenv.episode": "ep-1"})
	if err != nil || len(got) != 1 || got[0].ID != sb.ID || got[0].Endpoint != sb.Endpoint {
		t.Fatalf("second plugin's List = %+v, %v", got, err)
	}
	res, err := second.Exec(ctx, sb, []string{"pwd"})
	if err != nil || strings.TrimSpace(res.Stdout) != st.WorkDir {
		t.Fatalf("Exec via the second plugin = %+v, %v", res, err)
	}
	if err := second.Terminate(ctx, sb); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, "the env group to be gone", func() bool { return len(groupMembers(h.PGID)) == 0 })
	if err := second.Terminate(ctx, sb); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Terminate again over the wire = %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, sb.ID+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("state file kept after Terminate")
	}
}
