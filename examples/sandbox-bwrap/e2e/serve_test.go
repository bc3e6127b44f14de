package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"
)

// The day/eval-001 schedule of examples/gridsim/README.md, and its grade.
const (
	schedule = `<tool_call>
{"name": "submit_schedule", "arguments": {"schedule": [1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,-1,-1,0,0,0,0,0]}}
</tool_call>
.
`
	endTurn   = "done\n.\n"
	wantGrade = "reward 0.501"
)

// GridSim served with --sandbox bwrap, the plugin found on
// AGENTENV_PLUGIN_PATH and played by agentenv play; mid-episode the plugin
// binary is replaced. The host swaps the new one in and stops the old
// process; the episode's env, deployed by the old one, keeps playing, is
// scored, and is torn down by the new one with its handle.
func TestServeGridSimThroughHotSwap(t *testing.T) {
	needBwrap(t)
	plugins, stateDir := t.TempDir(), t.TempDir()
	bin := filepath.Join(plugins, "agentenv-sandbox-bwrap")
	goBuild(t, "./examples/sandbox-bwrap", bin, "-ldflags", "-X main.version=0.1.0-one")
	serve := start(t, []string{"AGENTENV_PLUGIN_PATH=" + plugins}, false, agentenv(t),
		"serve", filepath.Join(repoRoot, "examples", "gridsim"), "--sandbox", "bwrap", "--addr", "127.0.0.1:0",
		"--sandbox-config", "state_dir="+stateDir)
	url := waitOutput(t, serve.out, regexp.MustCompile(`serving: .*url=(http://[0-9.:]+)`), 5*time.Minute, "serving line")[1]
	oldPID := waitOutput(t, serve.out, regexp.MustCompile(`sandbox-bwrap: plugin started: pid=(\d+) version=0\.1\.0-one`), time.Second, "plugin start")[1]

	play := start(t, nil, true, agentenv(t), "play", url, "--task", "day/eval-001")
	waitOutput(t, play.out, regexp.MustCompile(`--- reply`), time.Minute, "first prompt")
	live := keepers(stateDir)
	if len(live) != 1 {
		t.Fatalf("keepers of the live episode's sandbox: %v", live)
	}

	// Replace the binary as docs/plugins.md says: build beside it, rename.
	goBuild(t, "./examples/sandbox-bwrap", filepath.Join(plugins, ".new"), "-ldflags", "-X main.version=0.1.0-two")
	if err := os.Rename(filepath.Join(plugins, ".new"), bin); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, serve.out, regexp.MustCompile(`hot swap: new calls go to the new plugin: pid=\d+ version=0\.1\.0-two`), time.Minute, "hot swap")
	waitOutput(t, serve.out, regexp.MustCompile(`hot swap: old plugin drained; stopping it: pid=`+oldPID), time.Minute, "old plugin stopped")
	// The host stops the old plugin by killing its process group: wait
	// until the group is gone, so the sandbox has been through it.
	pgid, _ := strconv.Atoi(oldPID)
	wait.Until(t, fmt.Sprintf("process group %d to be gone", pgid), func() bool { return syscall.Kill(-pgid, 0) != nil })
	if got := keepers(stateDir); len(got) != 1 || got[0] != live[0] {
		t.Fatalf("the episode's sandbox did not outlive the old plugin: keepers %v, want %v", got, live)
	}

	fmt.Fprint(play.stdin, schedule+endTurn)
	if err := play.wait(t, time.Minute); err != nil {
		t.Fatalf("play: %v\n%s", err, play.out)
	}
	waitOutput(t, play.out, regexp.MustCompile(regexp.QuoteMeta(wantGrade)), time.Second, "the graded reward")
	// The engine tears the env down in the background, through the new
	// plugin process and the handle the old one returned.
	wait.For(t, "the sandbox to stop after the episode", func() error {
		if left := keepers(stateDir); len(left) > 0 {
			return fmt.Errorf("still running: %v\n%s", left, serve.out)
		}
		return nil
	})
	waitOutput(t, serve.out, regexp.MustCompile(`sandbox-bwrap: terminated: .*`), 5*time.Second, "the new plugin's terminate")

	if err := syscall.Kill(serve.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := serve.wait(t, time.Minute); err != nil {
		t.Fatalf("serve: %v\n%s", err, serve.out)
	}
	if entries, _ := filepath.Glob(filepath.Join(stateDir, "bwrap-*")); len(entries) > 0 {
		t.Errorf("left in the state dir: %v", entries)
	}
}

// A server killed mid-episode (kill -9: its plugins die with it) leaves
// the episode's sandbox running; the next server on the same bundle and
// address reaps it through the plugin before serving.
func TestServeReapsAfterHostCrash(t *testing.T) {
	needBwrap(t)
	plugins, stateDir := t.TempDir(), t.TempDir()
	goBuild(t, "./examples/sandbox-bwrap", filepath.Join(plugins, "agentenv-sandbox-bwrap"))
	addr := freeAddr(t)
	serveArgs := []string{"serve", filepath.Join(repoRoot, "examples", "gridsim"), "--sandbox", "bwrap", "--addr", addr,
		"--sandbox-config", "state_dir=" + stateDir}
	env := []string{"AGENTENV_PLUGIN_PATH=" + plugins}
	serving := regexp.MustCompile(`agentenv: serving: `)

	first := start(t, env, false, agentenv(t), serveArgs...)
	waitOutput(t, first.out, serving, 5*time.Minute, "serving line")
	play := start(t, nil, true, agentenv(t), "play", "http://"+addr, "--task", "day/eval-003")
	waitOutput(t, play.out, regexp.MustCompile(`--- reply`), time.Minute, "first prompt")
	live := keepers(stateDir)
	if len(live) != 1 {
		t.Fatalf("keepers of the live episode's sandbox: %v", live)
	}
	if err := syscall.Kill(first.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.wait(t, 10*time.Second)
	_ = play.wait(t, 10*time.Second)
	if got := keepers(stateDir); len(got) != 1 || got[0] != live[0] {
		t.Fatalf("the sandbox did not outlive the killed server: keepers %v, want %v", got, live)
	}

	second := start(t, env, false, agentenv(t), serveArgs...)
	waitOutput(t, second.out, serving, 5*time.Minute, "serving line")
	waitOutput(t, second.out, regexp.MustCompile(`reaped sandboxes an earlier run left behind: .*count=1`), time.Second, "the reaping")
	if left := keepers(stateDir); len(left) > 0 {
		t.Fatalf("sandbox still running after the second server reaped: %v\n%s", left, second.out)
	}
	if err := syscall.Kill(second.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := second.wait(t, time.Minute); err != nil {
		t.Fatalf("serve: %v\n%s", err, second.out)
	}
}
