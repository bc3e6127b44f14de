package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sdktest/wait"
)

// portOf is the port a process sandbox's handle names.
func portOf(t *testing.T, sb sandbox.Sandbox) int {
	t.Helper()
	st, ok := fromHandle(sb)
	if !ok || st.Port == 0 {
		t.Fatalf("no port in the handle of %s", sb.ID)
	}
	return st.Port
}

// ourSpares lists the spare temp dirs this test process keeps.
func ourSpares(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), sparePrefix+spareOwner()+"-*"))
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

func rootOf(t *testing.T, p *Plugin, id string) string {
	t.Helper()
	st, err := readState(p.config().StateDir, id)
	if err != nil {
		t.Fatal(err)
	}
	return st.Root
}

// A torn-down env's temp dir, left as the deploy made it, is the next
// deploy's (the same dirs, renamed), empty; one the env wrote into, or
// changed, is removed as before and never handed out. Its state file,
// cut to a byte, is the next deploy's whatever the env did.
func TestTeardownKeepsPristineDirsForTheNextDeploy(t *testing.T) {
	for _, tc := range []struct {
		name string
		// episode runs in the first env's working dir before its teardown.
		episode string
		// hold keeps the first env's log open for writing through its
		// teardown, as a process that left its group would.
		hold bool
		kept bool
	}{
		{"untouched", "", false, true},
		{"a file in work", "echo secret > left", false, false},
		{"a dir in work", "mkdir sub", false, false},
		{"a file in tmp", `echo secret > "$TMPDIR/left"`, false, false},
		{"a file beside work", "echo secret > ../left", false, false},
		{"work made open", "chmod 0777 .", false, false},
		{"tmp removed", `rmdir "$TMPDIR"`, false, false},
		{"the log held open", "", true, false},
		{"the log removed", "rm ../env.log", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stateDir := t.TempDir()
			p := newPlugin(t, stateDir, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			first := deploy(t, p, testSpec("TESTENV_SAY=the first episode's output"))
			root := rootOf(t, p, first.ID)
			if tc.hold {
				f, err := os.OpenFile(filepath.Join(root, envLog), os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
			}
			firstState, err := os.Stat(statePath(stateDir, first.ID))
			if err != nil {
				t.Fatal(err)
			}
			firstPort, err := os.Lstat(filepath.Join(portsDir(stateDir), strconv.Itoa(portOf(t, first))))
			if err != nil {
				t.Fatal(err)
			}
			if tc.episode != "" {
				if r, err := p.Exec(ctx, first, []string{"sh", "-c", tc.episode}); err != nil || r.ExitCode != 0 {
					t.Fatalf("Exec: %+v, %v", r, err)
				}
			}
			before, err := os.Stat(root)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Terminate(ctx, first); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(root); !os.IsNotExist(err) {
				t.Fatalf("the torn-down env's temp dir is still at %s (%v)", root, err)
			}
			spares := ourSpares(t)
			if tc.kept != (len(spares) == 1) || len(spares) > 1 {
				t.Fatalf("spares after the teardown: %v, want kept = %v", spares, tc.kept)
			}
			// Nothing of the episode is at rest in a spare: its log is empty.
			if tc.kept {
				if fi, err := os.Stat(filepath.Join(spares[0], envLog)); err != nil || fi.Size() != 0 {
					t.Fatalf("the spare's log: %v, %v", fi, err)
				}
			}
			// The state file is kept whatever the env did, cut to a byte:
			// nothing of the env's record (its environment) at rest.
			stateSpares, _ := filepath.Glob(filepath.Join(stateDir, spareFilePrefix+spareOwner()+"-*"))
			if len(stateSpares) != 1 {
				t.Fatalf("state spares after the teardown: %v", stateSpares)
			}
			if fi, err := os.Stat(stateSpares[0]); err != nil || fi.Size() != 1 || fi.Mode() != 0o600 {
				t.Fatalf("the spare state file: %v, %v", fi, err)
			}
			second := deploy(t, p, testSpec())
			if err := echo(t, second.Endpoint); err != nil {
				t.Fatal(err)
			}
			next := rootOf(t, p, second.ID)
			after, err := os.Stat(next)
			if err != nil {
				t.Fatal(err)
			}
			// (Not kept, its dirs are gone: a new dir may get the old
			// one's inode number, so only reuse is checked here.)
			if tc.kept && !os.SameFile(before, after) {
				t.Errorf("the next deploy made new dirs; the first's were kept for it")
			}
			if left := ourSpares(t); len(left) != 0 {
				t.Errorf("spares after the next deploy: %v", left)
			}
			if next, err := os.Stat(statePath(stateDir, second.ID)); err != nil || !os.SameFile(firstState, next) {
				t.Errorf("the next deploy's state file is not the first's, renamed (%v)", err)
			}
			if next, err := os.Lstat(filepath.Join(portsDir(stateDir), strconv.Itoa(portOf(t, second)))); err != nil || !os.SameFile(firstPort, next) {
				t.Errorf("the next deploy's port reservation is not the first's, renamed (%v)", err)
			}
			// Whatever the first episode left, the second finds its dirs
			// as a fresh deploy makes them, its log its own.
			if log, err := os.ReadFile(filepath.Join(next, envLog)); err != nil || strings.Contains(string(log), "first episode") {
				t.Errorf("the second env's log: %q, %v", log, err)
			}
			for dir, want := range map[string][]string{next: {envLog, "tmp", "work"}, filepath.Join(next, "work"): nil, filepath.Join(next, "tmp"): nil} {
				entries, err := os.ReadDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, e := range entries {
					got = append(got, e.Name())
				}
				if len(got) != len(want) || (len(want) > 0 && (got[0] != want[0] || got[1] != want[1] || got[2] != want[2])) {
					t.Errorf("%s holds %v, want %v", dir, got, want)
				}
				if fi, err := os.Stat(dir); err != nil || fi.Mode() != os.ModeDir|0o700 {
					t.Errorf("%s: mode %v, %v", dir, fi.Mode(), err)
				}
			}
			if err := p.Terminate(ctx, second); err != nil {
				t.Fatal(err)
			}
			if err := p.Cleanup(); err != nil {
				t.Fatal(err)
			}
			if left := ourSpares(t); len(left) != 0 {
				t.Errorf("spares after Cleanup: %v", left)
			}
			if left, _ := filepath.Glob(filepath.Join(stateDir, spareFilePrefix+"*")); len(left) != 0 {
				t.Errorf("state spares after Cleanup: %v", left)
			}
		})
	}
}

// A plugin process killed outright keeps its spares; the next plugin's
// List removes them, and leaves those of a plugin that still runs.
func TestListReapsSparesOfGonePlugins(t *testing.T) {
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	// A plugin killed with its server is a zombie until someone reaps it:
	// gone too.
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zombie.Wait() })
	zpid := zombie.Process.Pid
	zstart, ok := procStart(zpid)
	if !ok {
		t.Fatal("no start time for the zombie")
	}
	wait.For(t, "the child to exit (a zombie, unreaped)", func() error {
		if f, ok := procStat(zpid); !ok || f[0][0] != 'Z' {
			return fmt.Errorf("pid %d is not a zombie yet", zpid)
		}
		return nil
	})
	tmp := os.TempDir()
	dead := filepath.Join(tmp, sparePrefix+strconv.Itoa(gone.Process.Pid)+".12345-1")
	undead := filepath.Join(tmp, sparePrefix+strconv.Itoa(zpid)+"."+strconv.FormatUint(zstart, 10)+"-1")
	live := filepath.Join(tmp, sparePrefix+spareOwner()+"-999999")
	// This process under another start time: a reused pid, so gone too.
	reused := filepath.Join(tmp, sparePrefix+strconv.Itoa(os.Getpid())+"."+strconv.FormatUint(selfStart+1, 10)+"-1")
	foreign := filepath.Join(tmp, sparePrefix+"not-ours")
	for _, dir := range []string{dead, undead, live, reused, foreign} {
		if err := os.MkdirAll(filepath.Join(dir, "work"), 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	stateDir := t.TempDir()
	deadState := filepath.Join(stateDir, spareFilePrefix+strconv.Itoa(gone.Process.Pid)+".12345-1")
	liveState := filepath.Join(stateDir, spareFilePrefix+spareOwner()+"-999999")
	deadPort := filepath.Join(portsDir(stateDir), spareFilePrefix+strconv.Itoa(gone.Process.Pid)+".12345-2")
	if err := os.MkdirAll(portsDir(stateDir), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{deadState, liveState, deadPort} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := newPlugin(t, stateDir, nil)
	if _, err := p.List(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]bool{dead: false, undead: false, reused: false, live: true, foreign: true, deadState: false, liveState: true, deadPort: false} {
		if _, err := os.Stat(dir); (err == nil) != want {
			t.Errorf("%s: exists = %v, want %v", filepath.Base(dir), err == nil, want)
		}
	}
}

// The spares one plugin keeps are bounded: past maxSpares a teardown
// removes the dirs.
func TestSparesAreBounded(t *testing.T) {
	s := spares{prefix: sparePrefix}
	t.Cleanup(func() { _ = s.drain() })
	for i := range maxSpares + 2 {
		root := filepath.Join(t.TempDir(), rootPrefix+strconv.Itoa(i))
		for _, d := range []string{root, filepath.Join(root, "work"), filepath.Join(root, "tmp")} {
			if err := os.Mkdir(d, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		if kept := s.Put(root); kept != (i < maxSpares) {
			t.Fatalf("put %d: kept = %v", i, kept)
		}
	}
}
