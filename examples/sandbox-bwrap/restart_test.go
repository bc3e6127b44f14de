package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

// The real binary, over go-plugin as the host runs it: an env deployed by
// one plugin process outlives that process when it is killed, and a second
// process lists it, runs a command in it and terminates it with its handle.
func TestEnvOutlivesKilledPlugin(t *testing.T) {
	needBwrap(t)
	bin := sdktest.Build(t, ".")
	dir := stateDir(t)
	cfg, _ := json.Marshal(map[string]any{"state_dir": dir, "grace": "2s", "network": false})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	first := sdktest.Launch(t, sdk.KindSandbox, bin).(*sandbox.Client)
	if err := first.Configure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	spec := testSpec()
	spec.Labels[sandbox.LabelEpisode] = "ep-1"
	sb, err := first.Deploy(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = newTestPlugin(t, dir, nil).Terminate(context.Background(), sb) })
	ask(t, sb.Endpoint, "/")
	pluginPID := pidOf(t, bin)
	if err := syscall.Kill(pluginPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, "the plugin process to die", func() bool { return !isLive(pluginPID) })
	if got := ask(t, sb.Endpoint, "/"); got != "testenv" {
		t.Fatalf("the env after its plugin was killed: %q", got)
	}

	second := sdktest.Launch(t, sdk.KindSandbox, bin).(*sandbox.Client)
	if err := second.Configure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	got, err := second.List(ctx, map[string]string{sandbox.LabelEpisode: "ep-1"})
	if err != nil || len(got) != 1 || got[0].ID != sb.ID || got[0].Endpoint != sb.Endpoint {
		t.Fatalf("the second plugin's List = %+v, %v", got, err)
	}
	res, err := second.Exec(ctx, sb, []string{"sh", "-c", "echo hi > note; pwd"})
	if err != nil || res.ExitCode != 0 || res.Stdout != "/agentenv/work\n" {
		t.Fatalf("Exec through the second plugin = %+v, %v", res, err)
	}
	if got := ask(t, sb.Endpoint, "/read?path=note"); got != "hi\n" {
		t.Errorf("the env does not see what Exec wrote in its work folder: %q", got)
	}
	if err := second.Terminate(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := second.Terminate(ctx, sb); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Terminate again = %v, want ErrNotFound", err)
	}
}

// pidOf is the pid of the one running process whose program is bin.
func pidOf(t *testing.T, bin string) int {
	t.Helper()
	var found []int
	for _, pid := range pids() {
		if exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err == nil && exe == bin && isLive(pid) {
			cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			if args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00"); len(args) == 1 {
				found = append(found, pid) // the plugin has no arguments; keepers have some
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one plugin process of %s, found %v", bin, found)
	}
	return found[0]
}

// A plugin killed after starting a keeper but before recording it leaves a
// state file without its pid; the next plugin process finds the sandbox by
// the keeper's command line, lists it and terminates it.
func TestReapsSandboxOfCutShortDeploy(t *testing.T) {
	needBwrap(t)
	dir := stateDir(t)
	p := newTestPlugin(t, dir, nil)
	spec := testSpec()
	spec.Labels[sandbox.LabelServer] = "crashed-server"
	sb := deploy(t, p, spec)
	st, err := readState(dir, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	keeperPID, initPID, initStart := st.Keeper, st.Init, st.InitStart
	st.handle = handle{Port: st.Port, Root: st.Root} // as written before the keeper started
	if err := writeState(dir, st); err != nil {
		t.Fatal(err)
	}

	next := newTestPlugin(t, dir, nil)
	got, err := next.List(context.Background(), map[string]string{sandbox.LabelServer: "crashed-server"})
	if err != nil || len(got) != 1 || got[0].ID != sb.ID {
		t.Fatalf("List = %+v, %v; want the half-recorded sandbox", got, err)
	}
	var h handle
	if err := json.Unmarshal(got[0].State, &h); err != nil || h.Keeper != keeperPID || h.Init != initPID {
		t.Fatalf("listed handle %s: %v; want keeper %d and init %d", got[0].State, err, keeperPID, initPID)
	}
	if err := next.Terminate(context.Background(), got[0]); err != nil {
		t.Fatal(err)
	}
	if running(initPID, initStart) {
		t.Error("the sandbox survived Terminate")
	}
	if _, err := os.Stat(st.Root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left", st.Root)
	}
}

// A state file whose keeper never started is removed, with its folder,
// once no deploy can still be starting it.
func TestForgetsDeployThatNeverStarted(t *testing.T) {
	dir := stateDir(t)
	id := newID()
	st := &state{ID: id, handle: handle{Root: sandboxRoot(dir, id), Port: 1}, Started: time.Now().Add(-time.Hour).UTC()}
	if err := writeState(dir, st); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(st.Root+"/work", 0o700); err != nil {
		t.Fatal(err)
	}
	p := newTestPlugin(t, dir, map[string]any{"ready_timeout": "1s"})
	if got, err := p.List(context.Background(), nil); err != nil || len(got) != 0 {
		t.Fatalf("List = %+v, %v", got, err)
	}
	for _, path := range []string{st.Root, statePath(dir, id)} {
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left", path)
		}
	}
}

// A sandbox whose processes died (a reboot, an OOM kill) is gone from List,
// and its files with it.
func TestListForgetsDeadSandboxes(t *testing.T) {
	needBwrap(t)
	dir := stateDir(t)
	p := newTestPlugin(t, dir, nil)
	sb := deploy(t, p, testSpec())
	st, err := readState(dir, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Killing the keeper kills bwrap (--die-with-parent), and so the sandbox.
	if err := syscall.Kill(st.Keeper, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Both gone: the keeper's own exit can show a moment after its init's.
	wait.Until(t, "the sandbox to die with its keeper", func() bool {
		return !running(st.Init, st.InitStart) && !running(st.Keeper, st.KeeperStart)
	})
	if got, err := p.List(context.Background(), nil); err != nil || len(got) != 0 {
		t.Fatalf("List = %+v, %v", got, err)
	}
	if _, err := os.Stat(st.Root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left", st.Root)
	}
}

// The module imports nothing of agentenv but its SDK: it is built the way
// a team outside this repository builds its own plugin.
func TestImportsOnlyTheSDK(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-test", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var sdkSeen bool
	for _, path := range strings.Fields(string(out)) {
		rest, ok := strings.CutPrefix(path, "github.com/agentenv/agentenv/")
		if !ok || strings.HasPrefix(rest, "examples/sandbox-bwrap") {
			continue
		}
		if !strings.HasPrefix(rest, "sdk") {
			t.Errorf("imports %s: a plugin may import only github.com/agentenv/agentenv/sdk/...", path)
		}
		sdkSeen = true
	}
	if !sdkSeen {
		t.Errorf("go list shows no SDK package at all:\n%s", out)
	}
}

func isLive(pid int) bool { _, ok := live(pid); return ok }
