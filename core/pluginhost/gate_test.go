package pluginhost

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gate holds calls of the rewardv test plugin (the "hold" key) until the
// test lets them go: the plugin writes its pid into the FIFO "arrived" and
// then waits on the FIFO "release". Both are blocking opens, so the test
// waits on the calls' arrival, not on a guess of how long they take.
type gate struct{ dir string }

// guard bounds every wait at the gate; only a broken test reaches it.
const guard = 60 * time.Second

func newGate(t *testing.T) gate {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"arrived", "release"} {
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return gate{dir}
}

// config is the plugin configuration that points it at the gate.
func (g gate) config() json.RawMessage {
	b, _ := json.Marshal(map[string]string{"gate": g.dir})
	return b
}

// arrivals waits until n held calls have reached a plugin process and
// returns the pids of the processes that hold them.
func (g gate) arrivals(t *testing.T, n int) []int {
	t.Helper()
	got := make(chan []int, 1)
	errs := make(chan error, 1)
	go func() {
		var pids []int
		for len(pids) < n { // each writer closes; reopen for the next
			f, err := os.Open(filepath.Join(g.dir, "arrived"))
			if err != nil {
				errs <- err
				return
			}
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				pid, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
				if err != nil {
					errs <- fmt.Errorf("bad arrival line %q", sc.Text())
					return
				}
				pids = append(pids, pid)
			}
			f.Close()
		}
		got <- pids
	}()
	select {
	case pids := <-got:
		return pids
	case err := <-errs:
		t.Fatalf("gate: %v", err)
	case <-time.After(guard):
		t.Fatalf("gate: %d held calls did not arrive within %s", n, guard)
	}
	return nil
}

// release lets the calls waiting at the gate go on.
func (g gate) release(t *testing.T) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(filepath.Join(g.dir, "release"), os.O_WRONLY, 0)
		if err == nil {
			err = f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("gate: %v", err)
		}
	case <-time.After(guard):
		t.Fatalf("gate: no held call to release within %s", guard)
	}
}
