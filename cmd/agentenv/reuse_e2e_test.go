package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"
)

// reuseBundle copies GridSim's bundle into a folder of the test's own,
// its env declaring reuse = n: the same tasks and env binary (built from
// GridSim's sources into the copy).
func reuseBundle(t *testing.T, n int) string {
	t.Helper()
	src, err := filepath.Abs(gridsimBundle)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	for _, glob := range []string{"README.md", "tasks/*", "evals/*"} {
		files, _ := filepath.Glob(filepath.Join(src, glob))
		for _, f := range files {
			rel, _ := filepath.Rel(src, f)
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dst, rel), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	envDir := filepath.Join(dst, "envs", "gridsim")
	if err := os.MkdirAll(envDir, 0o755); err != nil {
		t.Fatal(err)
	}
	toml := fmt.Sprintf("build = [\"env\", \"CGO_ENABLED=0\", \"go\", \"build\", \"-C\", %q, \"-trimpath\", \"-o\", %q, \".\"]\n"+
		"command = [\"bin/gridsim-env\"]\nreuse = %d\n", filepath.Join(src, "envs", "gridsim"), filepath.Join(envDir, "bin", "gridsim-env"), n)
	if err := os.WriteFile(filepath.Join(envDir, "env.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// A server whose envs are reused, killed with reset envs waiting in its
// pool, leaves nothing once it has started again: no env process, no temp
// dir, no state file.
func TestServeReusedEnvsKilledLeaveNothing(t *testing.T) {
	bundle := reuseBundle(t, 4)
	state := t.TempDir()
	tmp := t.TempDir() // the server's TMPDIR: every env's temp dir is under it
	env := []string{"TMPDIR=" + tmp}
	addr := freeAddr(t)
	s := startServe(t, bundle, addr, state, env, "--max-concurrent-envs", "8")
	const clients, days = 3, 3
	var wg sync.WaitGroup
	errs := make(chan error, clients*days)
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dialServe(t, addr, "")
			for d := range days {
				if _, err := playIdleDay(c, w*days+d); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("playing on reused envs: %v\n%s", err, s.log)
	}
	text := metricsText(t, addr, "")
	if got := metric(text, `agentenv_env_reuses_total{env="gridsim",sandbox="local"}`); got < clients {
		t.Fatalf("%d episodes on %d clients at reuse = 4: %v episodes got a reset env, want at least %d", clients*days, clients, got, clients)
	}
	// The last episodes' envs are reset and wait in the pool: alive, no
	// episode holding them.
	wait.For(t, "the resets after the last episodes to pass", func() error {
		text = metricsText(t, addr, "")
		if metric(text, `agentenv_env_resets_total{env="gridsim",result="ok",sandbox="local"}`) < clients*days-clients {
			return fmt.Errorf("/metrics:\n%s", text)
		}
		return nil
	})
	if live := envsUnder(tmp); len(live) == 0 {
		t.Fatalf("no reset env is alive in the pool before the kill")
	}
	s.signalAndWait(t, syscall.SIGKILL, 10*time.Second)
	if len(envsUnder(tmp)) == 0 {
		t.Log("no env outlived the killed server this time (nothing for the restart to reap)")
	}
	final := startServe(t, bundle, addr, state, env)
	if left := envsUnder(tmp); len(left) > 0 {
		t.Errorf("env processes %v survived the restart", left)
	}
	if left := sandboxLeftovers(tmp, state); len(left) > 0 {
		t.Errorf("left after the restart (temp dirs, spares, state files, reservations): %v", left)
	}
	if code := final.signalAndWait(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, final.log)
	}
	// A stopped plugin keeps no spares either.
	if left := sandboxLeftovers(tmp, state); len(left) > 0 {
		t.Errorf("left after the last server stopped: %v", left)
	}
}
