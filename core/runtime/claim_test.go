package runtime

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

func TestClaimStates(t *testing.T) {
	dir := t.TempDir()
	state := func(id string) ServerState {
		t.Helper()
		st, err := State(dir, id)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := state("srv"); st != ServerUnknown {
		t.Fatalf("before any claim: %s", st)
	}
	a, err := Claim(dir, "srv")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Claim(dir, "srv") // a second holder of the same id
	if err != nil {
		t.Fatal(err)
	}
	if st := state("srv"); st != ServerRunning {
		t.Fatalf("claimed twice: %s", st)
	}
	if err := a.Release(true); err != nil {
		t.Fatal(err)
	}
	if st := state("srv"); st != ServerRunning {
		t.Fatalf("one holder left: %s", st)
	}
	if err := b.Release(true); err != nil {
		t.Fatal(err)
	}
	if st := state("srv"); st != ServerUnknown {
		t.Fatalf("after a clean release: %s (the claim file should be gone)", st)
	}
	c, _ := Claim(dir, "srv")
	if err := c.Release(false); err != nil {
		t.Fatal(err)
	}
	if st := state("srv"); st != ServerDead {
		t.Fatalf("after a release that left sandboxes: %s", st)
	}
	if _, err := Claim(dir, "../x"); err == nil {
		t.Fatal("claimed an id that is a path")
	}
}

// claimHolderVar makes the test binary a claim holder (see holdClaim).
const claimHolderVar = "CLAIM_HOLDER_DIR"

// holdClaim claims "killed" in dir, says so on stdout and holds the claim
// until killed, or until its stdin closes (its parent test is gone).
// TestMain runs it before building anything: a helper that first built the
// suite's binaries once took longer than the test would wait.
func holdClaim(dir string) {
	if _, err := Claim(dir, "killed"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("held")
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// A server SIGKILLed drops its claim with its life: it reads as dead.
func TestClaimDiesWithProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), claimHolderVar+"="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Its "held" line is the event; a holder that dies first closes stdout.
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "held\n" {
		t.Fatalf("the claim holder did not claim: %q, %v", line, err)
	}
	if st, _ := State(dir, "killed"); st != ServerRunning {
		t.Fatalf("while the holder lives: %s", st)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if st, _ := State(dir, "killed"); st != ServerDead {
		t.Fatalf("after SIGKILL: %s", st)
	}
}

func TestReapDead(t *testing.T) {
	labels := func(server string) map[string]string {
		if server == "" {
			return map[string]string{sandbox.LabelEpisode: "e"}
		}
		return map[string]string{sandbox.LabelServer: server}
	}
	for _, tc := range []struct {
		all  bool
		left []string
	}{
		{false, []string{"of-running", "of-unknown", "unlabelled"}},
		{true, []string{"of-running"}},
	} {
		dir := t.TempDir()
		running, _ := Claim(dir, "running")
		dead, _ := Claim(dir, "dead")
		dead.Release(false)
		f := &fakeReaper{live: map[string]map[string]string{
			"of-self": labels("self"), "of-running": labels("running"), "of-dead": labels("dead"),
			"of-dead-2": labels("dead"), "of-unknown": labels("unknown"), "unlabelled": labels(""),
		}}
		reaped, err := ReapDead(context.Background(), f, dir, "self", tc.all)
		if err != nil {
			t.Fatal(err)
		}
		if reaped["self"] != 1 || reaped["dead"] != 2 || reaped["running"] != 0 {
			t.Errorf("all=%v: reaped %v", tc.all, reaped)
		}
		for _, id := range tc.left {
			if f.live[id] == nil {
				t.Errorf("all=%v: %s was reaped", tc.all, id)
			}
		}
		if len(f.live) != len(tc.left) {
			t.Errorf("all=%v: left %v, want %v", tc.all, f.live, tc.left)
		}
		if st, _ := State(dir, "dead"); st != ServerUnknown {
			t.Errorf("the dead server's claim is still there (%s) after its sandboxes were reaped", st)
		}
		if st, _ := State(dir, "running"); st != ServerRunning {
			t.Errorf("the running server reads %s", st)
		}
		running.Release(true)
	}
}
