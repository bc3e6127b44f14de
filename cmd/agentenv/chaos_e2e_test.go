package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/gorilla/websocket"
)

// pluginProcs lists the children of ppid whose command line holds every
// one of words.
func pluginProcs(ppid int, words ...string) []int {
	var out []int
	for _, pid := range childrenOf(ppid) {
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		all := true
		for _, w := range words {
			all = all && bytes.Contains(cmdline, []byte(w))
		}
		if all {
			out = append(out, pid)
		}
	}
	return out
}

// envsUnder lists live processes whose working directory is under dir:
// the env processes of a server whose TMPDIR is dir.
func envsUnder(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd")
		if err == nil && strings.HasPrefix(cwd, dir+"/") && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// sandboxLeftovers lists what the process sandbox keeps of its envs in a
// server's TMPDIR (temp dirs, spares) and state dir (state files, spare
// ones, port reservations): nothing, once the server has stopped.
func sandboxLeftovers(tmp, state string) []string {
	left, _ := filepath.Glob(filepath.Join(tmp, "agentenv-local-*"))
	for _, pattern := range []string{"*.json", ".spare-*", "ports/*"} {
		m, _ := filepath.Glob(filepath.Join(state, pattern))
		left = append(left, m...)
	}
	return left
}

// load keeps n clients playing GridSim days until stop is closed; failures
// are expected (the test kills things under them) and ignored.
func load(t *testing.T, addr string, n int, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				conn, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/ws", nil)
				if err != nil {
					time.Sleep(50 * time.Millisecond) // the server is down (killed): retry
					continue
				}
				c := &e2eClient{t: t, conn: conn}
				for {
					select {
					case <-stop:
						conn.Close()
						return
					default:
					}
					if _, err := playIdleDay(c, (w*50+i)%200); err != nil {
						break
					}
				}
				conn.Close()
			}
		}()
	}
	return &wg
}

// Killing the sandbox plugin and the server under load, round after round,
// leaves nothing behind once the server has started again: no env process,
// no temp dir, no state file. And envs whose teardown hit a killed plugin
// are torn down by the restarted plugin while the same server runs.
func TestServeChaosKillsLeaveNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos rounds take a while")
	}
	state := t.TempDir()
	tmp := t.TempDir() // the server's TMPDIR: every env's temp dir is under it
	env := []string{"TMPDIR=" + tmp}
	addr := freeAddr(t)
	const rounds, clients = 3, 6
	for round := range rounds {
		s := startServe(t, gridsimBundle, addr, state, env, "--max-concurrent-envs", "8")
		stop := make(chan struct{})
		wg := load(t, addr, clients, stop)
		// The kills land while episodes are live (an event), then at
		// moments the schedule below picks: when they land is the chaos,
		// and nothing may be left whenever it is.
		wait.For(t, fmt.Sprintf("round %d: an episode live under load", round), func() error {
			if len(envsUnder(tmp)) == 0 {
				return fmt.Errorf("none; the server's log:\n%s", s.log)
			}
			return nil
		})
		// Kill the sandbox plugin twice under load; the host restarts it.
		for range 2 {
			for _, pid := range pluginProcs(s.cmd.Process.Pid, "plugin-serve", "sandbox-local") {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(400 * time.Millisecond) // the chaos schedule, not a wait
		}
		if round == 0 {
			// The same server, no restart: stop the load and every env the
			// killed plugin could not tear down goes through the new one.
			close(stop)
			wg.Wait()
			wait.For(t, fmt.Sprintf("round %d: every env gone after the load stopped, with the server up", round), func() error {
				if left := envsUnder(tmp); len(left) > 0 {
					return fmt.Errorf("env processes %v still run; the server's log:\n%s", left, s.log)
				}
				return nil
			}, wait.Every(100*time.Millisecond))
			s.signalAndWait(t, syscall.SIGKILL, 10*time.Second)
			continue
		}
		time.Sleep(500 * time.Millisecond) // the chaos schedule, not a wait
		s.signalAndWait(t, syscall.SIGKILL, 10*time.Second)
		close(stop)
		wg.Wait()
	}
	if len(envsUnder(tmp)) == 0 {
		t.Log("no env process outlived the killed servers this time (nothing for the restart to reap)")
	}
	final := startServe(t, gridsimBundle, addr, state, env)
	if left := envsUnder(tmp); len(left) > 0 {
		t.Errorf("env processes %v survived the restart", left)
	}
	if left := sandboxLeftovers(tmp, state); len(left) > 0 {
		t.Errorf("left after the restart (temp dirs, spares, state files, reservations): %v", left)
	}
	// The restarted server plays on: its teardowns keep their envs' files
	// as spares, until it stops.
	stop := make(chan struct{})
	wg := load(t, addr, 2, stop)
	wait.For(t, "a teardown to keep spares", func() error {
		if spares, _ := filepath.Glob(filepath.Join(tmp, "agentenv-local-spare-*")); len(spares) == 0 {
			return errors.New("no spare temp dir yet")
		}
		return nil
	})
	close(stop)
	wg.Wait()
	if code := final.signalAndWait(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, final.log)
	}
	// A stopped plugin keeps no spares either.
	if left := sandboxLeftovers(tmp, state); len(left) > 0 {
		t.Errorf("left after the last server stopped: %v", left)
	}
}
