package local

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// An env this plugin process started dies and its pid comes back as the
// leader of an unrelated group (say another sandbox's env). Terminate
// must not signal that group: the start time tells them apart.
func TestTerminateOwnSandboxAfterPIDReuse(t *testing.T) {
	stateDir := t.TempDir()
	p := newPlugin(t, stateDir, map[string]any{"grace": "200ms"})
	sb := deploy(t, p, testSpec())
	st, err := readState(stateDir, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The state file holds no pid (it is written before the start): the
	// handle does.
	h, ok := fromHandle(sb)
	if !ok || h.PGID <= 0 {
		t.Fatalf("handle %s has no process group", sb.State)
	}
	st.handle = h.handle
	_ = syscall.Kill(-st.PGID, syscall.SIGKILL)
	p.mu.Lock()
	pr := p.procs[sb.ID]
	p.mu.Unlock()
	select {
	case <-pr.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the killed env was not reaped")
	}

	// Stand-in for the reused pid: a live group leader of someone else's.
	// /proc's start times count clock ticks (10 ms), and this test runs in
	// less than that: a stand-in started in the env's own tick would look
	// like the env itself (a real reused pid never is: the pid space must
	// wrap first), so start it in a later tick.
	var foreign *exec.Cmd
	var exited chan struct{}
	for try := 0; ; try++ {
		foreign = exec.Command("sleep", "30")
		foreign.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := foreign.Start(); err != nil {
			t.Fatal(err)
		}
		exited = make(chan struct{})
		go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(foreign, exited)
		if start, ok := procStart(foreign.Process.Pid); !ok || start != st.ProcStart || try == 50 {
			break
		}
		t.Logf("stand-in %d started in the env's clock tick; again", try)
		_ = foreign.Process.Kill()
		<-exited
		time.Sleep(10 * time.Millisecond) // one clock tick
	}
	t.Cleanup(func() { _ = foreign.Process.Kill(); <-exited })
	if start, _ := procStart(foreign.Process.Pid); start == st.ProcStart {
		t.Fatal("could not start a stand-in in another clock tick than the env")
	}
	st.PID, st.PGID = foreign.Process.Pid, foreign.Process.Pid // ProcStart stays the env's
	if err := writeState(stateDir, st); err != nil {
		t.Fatal(err)
	}

	if err := p.Terminate(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		t.Fatal("Terminate signalled a process group that is not the sandbox's")
	case <-time.After(300 * time.Millisecond): // an absence: a window for a wrong signal to show
	}
}
