package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

// The env sees only its own sandbox's processes: not the test, not a
// marker process started on the host.
func TestEnvCannotSeeHostProcesses(t *testing.T) {
	needBwrap(t)
	marker := exec.Command("sleep", "31.337")
	if err := marker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = marker.Process.Kill(); _ = marker.Wait() })
	p := newTestPlugin(t, stateDir(t), nil)
	sb := deploy(t, p, testSpec())
	procs := strings.TrimSpace(ask(t, sb.Endpoint, "/procs"))
	lines := strings.Split(procs, "\n")
	// bwrap's init and the env itself.
	if len(lines) > 2 || strings.Contains(procs, "31.337") || strings.Contains(procs, "-test.") {
		t.Fatalf("the env sees processes outside its sandbox:\n%s", procs)
	}
	var who struct {
		Hostname string `json:"hostname"`
		PID      int    `json:"pid"`
	}
	if err := json.Unmarshal([]byte(ask(t, sb.Endpoint, "/whoami")), &who); err != nil {
		t.Fatal(err)
	}
	if who.PID > 2 || who.Hostname != sb.ID {
		t.Errorf("the env is pid %d on host %q; want pid 1 or 2 of its own namespace, on a host named %s", who.PID, who.Hostname, sb.ID)
	}
}

// The env writes to its work folder and /tmp, both private to its sandbox,
// and nowhere else: not the host's root, its own bundle folder, the
// sandbox's setup, or the plugin's state (which it cannot even read).
func TestEnvCannotWriteOutsideWorkDir(t *testing.T) {
	needBwrap(t)
	dir := stateDir(t)
	p := newTestPlugin(t, dir, nil)
	other := deploy(t, p, testSpec())
	spec := testSpec()
	spec.EnvVars = map[string]string{"AGENTENV_TEST_SECRET": "hush"}
	sb := deploy(t, p, spec)
	root := sandboxRoot(dir, sb.ID)
	hostTmp := "bwrap-test-" + strings.TrimPrefix(sb.ID, "bwrap-")

	for _, path := range []string{"/agentenv/work/notes.txt", "/tmp/" + hostTmp} {
		if got := ask(t, sb.Endpoint, "/write?path="+url.QueryEscape(path)); got != "ok" {
			t.Errorf("writing %s: %s", path, got)
		}
	}
	if data, err := os.ReadFile(filepath.Join(root, "work", "notes.txt")); err != nil || string(data) != "written by the env\n" {
		t.Errorf("work/notes.txt on the host: %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(root, "tmp", hostTmp)); err != nil {
		t.Errorf("the env's /tmp is not its sandbox's tmp/: %v", err)
	}
	if _, err := os.Stat(filepath.Join(os.TempDir(), hostTmp)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the env wrote to the host's /tmp")
	}
	for _, path := range []string{
		"/etc/agentenv-test", "/usr/agentenv-test", "/agentenv-test", "/agentenv/agentenv-test",
		filepath.Join(envDir, "agentenv-test"), filepath.Join(dir, "agentenv-test"),
		filepath.Join(root, "work", "agentenv-test"), "/root/agentenv-test",
	} {
		if got := ask(t, sb.Endpoint, "/write?path="+url.QueryEscape(path)); got == "ok" {
			t.Errorf("the env wrote %s", path)
		}
	}
	// Files that act on the whole machine when root writes them: only
	// opened for writing, never written, in case the sandbox is wrong.
	for _, path := range []string{"/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger", "/proc/sys/kernel/hostname", "/sys/kernel/mm/transparent_hugepage/enabled"} {
		if got := ask(t, sb.Endpoint, "/openw?path="+url.QueryEscape(path)); got == "ok" {
			t.Errorf("the env can open %s for writing", path)
		}
	}
	// The state files hold envs' variables: hidden from every env.
	for _, path := range []string{statePath(dir, other.ID), statePath(dir, sb.ID)} {
		if got := ask(t, sb.Endpoint, "/read?path="+url.QueryEscape(path)); !strings.Contains(got, "no such file") {
			t.Errorf("the env read %s: %.200s", path, got)
		}
	}
	if got := ask(t, sb.Endpoint, "/whoami"); !strings.Contains(got, `"secret":"hush"`) || !strings.Contains(got, `"wd":"/agentenv/work"`) {
		t.Errorf("the env's own view: %s", got)
	}
}

// Terminate leaves nothing of a sandbox: not the processes the env left
// behind in a session of their own, double-forked or deaf to SIGTERM, nor
// its folder, state file or port reservation.
func TestTerminateLeavesNothing(t *testing.T) {
	needBwrap(t)
	dir := stateDir(t)
	p := newTestPlugin(t, dir, map[string]any{"grace": "500ms"})
	sb := deploy(t, p, testSpec())
	var h handle
	if err := json.Unmarshal(sb.State, &h); err != nil || h.PidNS == 0 {
		t.Fatalf("handle %s: %v", sb.State, err)
	}
	if got := ask(t, sb.Endpoint, "/spawn"); got != "ok" {
		t.Fatal(got)
	}
	// init, the env, and three sleeps (one under a shell that ignores SIGTERM).
	var pids []int
	wait.Until(t, "the env's children", func() bool { pids = members(h.PidNS); return len(pids) >= 6 })
	starts := map[int]uint64{}
	for _, pid := range pids {
		starts[pid], _ = procStart(pid)
	}
	if err := p.Terminate(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	for pid, start := range starts {
		if running(pid, start) {
			cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			t.Errorf("process %d (%q) of the sandbox outlived Terminate", pid, cmdline)
		}
	}
	for _, path := range []string{sandboxRoot(dir, sb.ID), statePath(dir, sb.ID), ports(dir).Path(h.Port)} {
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left after Terminate", path)
		}
	}
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(sb.Endpoint, "http://"), time.Second); err == nil {
		c.Close()
		t.Error("the endpoint still accepts connections")
	}
	if err := p.Terminate(context.Background(), sb); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("second Terminate = %v, want ErrNotFound", err)
	}
}

// With the network off the env reaches nothing on the host, yet the host
// reaches the env through the keeper's relay; with it on, both ways work.
func TestNetwork(t *testing.T) {
	needBwrap(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for _, network := range []bool{true, false} {
		p := newTestPlugin(t, stateDir(t), map[string]any{"network": network})
		sb := deploy(t, p, testSpec())
		got := ask(t, sb.Endpoint, "/dial?addr="+ln.Addr().String())
		if network != (got == "ok") {
			t.Errorf("network %v: the env dialling the host's %s: %s", network, ln.Addr(), got)
		}
		var who struct {
			Port string `json:"port"`
		}
		_ = json.Unmarshal([]byte(ask(t, sb.Endpoint, "/whoami")), &who)
		if !network && who.Port != "18765" {
			t.Errorf("network off: the env listens on %s, want its declared port 18765", who.Port)
		}
	}
}

// Limits apply to the env and to commands run by Exec.
func TestLimits(t *testing.T) {
	needBwrap(t)
	p := newTestPlugin(t, stateDir(t), map[string]any{"limits": map[string]any{"open_files": 100, "file_size_mb": 2}})
	sb := deploy(t, p, testSpec())
	var who struct {
		NoFile uint64 `json:"nofile"`
		FSize  uint64 `json:"fsize"`
	}
	if err := json.Unmarshal([]byte(ask(t, sb.Endpoint, "/whoami")), &who); err != nil {
		t.Fatal(err)
	}
	if who.NoFile != 100 || who.FSize != 2<<20 {
		t.Errorf("the env's limits: open files %d, file size %d; want 100 and %d", who.NoFile, who.FSize, 2<<20)
	}
	res, err := p.Exec(context.Background(), sb, []string{"sh", "-c", "ulimit -n; head -c 3000000 /dev/zero > big; echo exit=$?"})
	if err != nil || !strings.HasPrefix(res.Stdout, "100\n") || strings.Contains(res.Stdout, "exit=0") {
		t.Errorf("Exec under limits = %+v, %v; want 100 open files and a failed 3 MB write", res, err)
	}
}

// Hidden paths are empty in the sandbox; extra binds show read-only where
// they are put.
func TestHideAndBinds(t *testing.T) {
	needBwrap(t)
	secret, data := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(secret, "key"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "prices.csv"), []byte("hour,price\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Under the host's /tmp, secret would be invisible anyway: hide a
	// folder outside it too.
	const share = "/usr/share"
	p := newTestPlugin(t, stateDir(t), map[string]any{"hide": []string{secret, share}, "binds": []string{data + ":/data", secret + ":/secret"}})
	sb := deploy(t, p, testSpec())
	if got := ask(t, sb.Endpoint, "/read?path=/data/prices.csv"); got != "hour,price\n" {
		t.Errorf("reading the bind /data/prices.csv: %q", got)
	}
	if got := ask(t, sb.Endpoint, "/write?path=/data/new"); got == "ok" {
		t.Error("the env wrote into a read-only bind")
	}
	if got := ask(t, sb.Endpoint, "/read?path="+url.QueryEscape(filepath.Join(secret, "key"))); got == "s3cret" {
		t.Error("the env read a hidden file")
	}
	if got := ask(t, sb.Endpoint, "/read?path="+url.QueryEscape(share)); !strings.Contains(got, "is a directory") {
		t.Errorf("hidden %s: %q", share, got)
	}
	res, err := p.Exec(context.Background(), sb, []string{"sh", "-c", "ls -A " + share + " | wc -l; cat /secret/key"})
	if err != nil || res.Stdout != "0\ns3cret" {
		t.Errorf("Exec: %+v, %v; want the hidden %s empty and the bound key readable", res, err, share)
	}
}

// An env that exits before it listens fails Deploy with its own output,
// and leaves nothing behind.
func TestDeployFailsWithTheEnvsOutput(t *testing.T) {
	needBwrap(t)
	dir := stateDir(t)
	p := newTestPlugin(t, dir, nil)
	for _, tc := range []struct {
		command []string
		want    string
	}{
		{[]string{"sh", "-c", "echo 'cannot open levels.json' >&2; exit 2"}, "exited before listening on port"},
		{[]string{"bin/missing"}, "bin/missing"},
	} {
		spec := testSpec()
		spec.Command = tc.command
		_, err := p.Deploy(context.Background(), spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Deploy(%q) = %v, want an error containing %q", tc.command, err, tc.want)
		}
		if tc.command[0] == "sh" && !strings.Contains(err.Error(), "cannot open levels.json") {
			t.Errorf("Deploy's error lacks the env's output: %v", err)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "ports" {
			t.Errorf("%s left in the state dir", e.Name())
		}
	}
	if _, err := p.Deploy(context.Background(), sandbox.Spec{Env: "web", Dir: envDir, Image: "nginx:1"}); err == nil || !strings.Contains(err.Error(), "has only an image") {
		t.Errorf("Deploy of an image-only env = %v", err)
	}
}
