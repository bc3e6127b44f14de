package local

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sandbox/hostenv"
	"github.com/agentenv/agentenv/sdk/sdktest/wait"
)

// A plugin killed after starting an env but before recording its pid
// leaves a state file with PID 0. The next plugin process finds the env by
// its id in the env's environment, lists it, and terminates it with its
// temp dir.
func TestRecoversEnvStartedByAKilledDeploy(t *testing.T) {
	stateDir := t.TempDir()
	root, err := os.MkdirTemp("", rootPrefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	id := newID()
	st := &state{ID: id, Env: "testenv", handle: handle{Root: root, Port: 1},
		Labels: map[string]string{"agentenv.server": "s1"}, Started: time.Now().UTC()}
	if err := writeState(stateDir, st); err != nil {
		t.Fatal(err)
	}
	// The env the killed plugin had started.
	env := exec.Command("sleep", "60")
	env.Env = []string{"PATH=" + os.Getenv("PATH"), sandbox.EnvSandboxID + "=" + id}
	env.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := env.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = env.Wait(); close(exited) }()
	t.Cleanup(func() { _ = env.Process.Kill(); <-exited })

	p := newPlugin(t, stateDir, map[string]any{"grace": "1s"})
	got, err := p.List(context.Background(), map[string]string{"agentenv.server": "s1"})
	if err != nil || len(got) != 1 || got[0].ID != id {
		t.Fatalf("List = %+v, %v; want the half-recorded sandbox", got, err)
	}
	if err := p.Terminate(context.Background(), got[0]); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		t.Fatal("the env survived Terminate")
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("temp dir %s kept", root)
	}
	if left := stateLeft(stateDir); len(left) != 0 {
		t.Errorf("state left: %v", left)
	}
}

// A state recorded for an env that never started is removed, with its
// temp dir, once no deploy can still be starting it: its owner process is
// gone, or ready_timeout has passed.
func TestForgetsDeployThatNeverStarted(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		started time.Time
		owner   int
	}{
		{"older than ready_timeout", time.Now().Add(-time.Hour), 0},
		{"its plugin process is gone", time.Now(), dead.Process.Pid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stateDir := t.TempDir()
			root, err := os.MkdirTemp("", rootPrefix+"*")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(root) })
			st := &state{ID: newID(), handle: handle{Root: root}, Started: tc.started.UTC(), Owner: tc.owner, OwnerStart: 1}
			if err := writeState(stateDir, st); err != nil {
				t.Fatal(err)
			}
			p := newPlugin(t, stateDir, map[string]any{"ready_timeout": "1m"})
			if got, err := p.List(context.Background(), nil); err != nil || len(got) != 0 {
				t.Fatalf("List = %+v, %v", got, err)
			}
			if _, err := os.Stat(root); !os.IsNotExist(err) {
				t.Errorf("temp dir %s kept", root)
			}
			if left := stateLeft(stateDir); len(left) != 0 {
				t.Errorf("state left: %v", left)
			}
		})
	}
}

// An env that finds its port taken before it binds it is started again on
// another port, not failed.
func TestDeployRetriesALostPort(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "lost-once")
	p := newPlugin(t, t.TempDir(), nil)
	sb := deploy(t, p, sandbox.Spec{
		Env: "flaky", Dir: dir, Port: 18765,
		Command: []string{"sh", "-c", `if [ ! -e "$0" ]; then touch "$0"; echo "listen tcp 127.0.0.1:$AGENTENV_PORT: bind: address already in use" >&2; exit 1; fi; exec python3 -c "import os,socket,time
s=socket.socket(); s.bind(('127.0.0.1', int(os.environ['AGENTENV_PORT']))); s.listen(); time.sleep(60)"`, marker},
	})
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the first start did not run")
	}
	if sb.Endpoint == "" {
		t.Fatal("no endpoint")
	}
}

func TestPortsAreBelowTheEphemeralRange(t *testing.T) {
	lo, hi := hostenv.PortRange()
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skip("no /proc/sys/net/ipv4/ip_local_port_range")
	}
	var start int
	for _, c := range string(data) {
		if c < '0' || c > '9' {
			break
		}
		start = start*10 + int(c-'0')
	}
	if hi >= start || lo < 1024 || lo > hi {
		t.Fatalf("port range %d-%d overlaps the ephemeral range from %d", lo, hi, start)
	}
}

// A deploy writes its state file once, before the env starts, so the file
// holds no pid. Another plugin process (as after a restart) finds every
// such env by its id in the env's environment, in one scan, each with the
// pid and start time its deploy returned: the env's leader, not the child
// it started, though both carry the id. It then terminates them by id
// alone (no handle), and nothing is left. An env that cleared its
// environment is found by its stdout, its sandbox's log.
func TestRestartedPluginFindsPidlessEnvs(t *testing.T) {
	stateDir := t.TempDir()
	first := newPlugin(t, stateDir, nil)
	want := map[string]handle{}
	cleared := testSpec()
	cleared.Command = []string{"sh", "-c", `exec env -i python3 -c "import socket,time
s=socket.socket(); s.bind(('127.0.0.1', $AGENTENV_PORT)); s.listen(); time.sleep(60)"`}
	for _, spec := range []sandbox.Spec{testSpec("TESTENV_CHILD=1"), testSpec("TESTENV_CHILD=1"), testSpec("TESTENV_CHILD=1"), cleared} {
		sb := deploy(t, first, spec)
		var h handle
		if err := json.Unmarshal(sb.State, &h); err != nil || h.PID <= 0 || h.ProcStart == 0 {
			t.Fatalf("handle %s: %+v, %v", sb.State, h, err)
		}
		want[sb.ID] = h
		if spec.Command[0] != "sh" {
			wait.Until(t, "the env's child to start", func() bool { return len(groupMembers(h.PGID)) == 2 })
		}
		st, err := readState(stateDir, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.PID != 0 || st.Root != h.Root || st.Port != h.Port {
			t.Fatalf("state file of %s: pid %d, root %q, port %d; want it as written before the start (pid 0, root %q, port %d)",
				sb.ID, st.PID, st.Root, st.Port, h.Root, h.Port)
		}
	}

	second := newPlugin(t, stateDir, nil)
	got, err := second.List(context.Background(), map[string]string{"agentenv.instance": "test"})
	if err != nil || len(got) != len(want) {
		t.Fatalf("restarted plugin's List = %+v, %v; want %d sandboxes", got, err, len(want))
	}
	for _, sb := range got {
		var h handle
		_ = json.Unmarshal(sb.State, &h)
		if h != want[sb.ID] {
			t.Errorf("listed %s as %+v; its deploy returned %+v", sb.ID, h, want[sb.ID])
		}
	}
	for id, h := range want {
		if err := second.Terminate(context.Background(), sandbox.Sandbox{ID: id}); err != nil {
			t.Fatalf("Terminate %s by id: %v", id, err)
		}
		if members := groupMembers(h.PGID); len(members) > 0 {
			t.Errorf("%s: env or its child survived: %v", id, members)
		}
		if _, err := os.Stat(h.Root); !os.IsNotExist(err) {
			t.Errorf("%s: temp dir %s kept", id, h.Root)
		}
	}
	if left := stateLeft(stateDir); len(left) != 0 {
		t.Errorf("state left: %v", left)
	}
}
