package hostenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/hashicorp/go-hclog"
)

// An env flooding its log, opened with OpenLog, is kept near the cap
// while it writes (not cut only after), and what is left ends with what
// it wrote last, under a line saying how much was cut.
func TestWatchLogsCapsAFlood(t *testing.T) {
	const max = 1 << 20
	const flood = 256 << 20
	dir := t.TempDir()
	path := filepath.Join(dir, "env.log")
	f, err := OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", "yes 'a line of env output' | head -c 268435456; echo LAST-LINE")
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		WatchLogs(ctx, func() string { return filepath.Join(dir, "*.log") }, func() int64 { return max }, hclog.NewNullLogger())
	}()
	defer func() { cancel(); <-watching }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var biggest int64
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		case <-tick.C:
		}
		if info, err := os.Stat(path); err == nil {
			biggest = max64(biggest, info.Size())
		}
	}
	if biggest > flood/2 {
		t.Errorf("the log reached %d MiB of a %d MiB flood: not capped while written", biggest>>20, flood>>20)
	}
	wait.For(t, "the log to be cut to its cap", func() error {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Size() > max {
			return fmt.Errorf("the log holds %d bytes, over its cap of %d", info.Size(), max)
		}
		return nil
	}, wait.Every(LogCheckInterval))
	cancel()
	<-watching // no cut is under way as the log is read
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	if !strings.HasSuffix(s, "LAST-LINE\n") || !strings.Contains(s, "bytes of this log were cut") {
		t.Fatalf("the capped log does not keep its end under a cut line: %.120q ... %q", s, s[len(s)-min(len(s), 40):])
	}
	if strings.Contains(s, "\x00") {
		t.Fatal("the capped log has a hole of zeros: the env did not write at the end")
	}
}

func max64(a, b int64) int64 { return max(a, b) }
