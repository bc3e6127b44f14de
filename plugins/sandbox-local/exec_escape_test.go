package local

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A child that leaves the command's process group (setsid) survives the
// group kill and keeps the output pipe open; Exec must still return once
// the command exits, within its deadline, with the output it got.
func TestExecChildOutsideGroupDoesNotHang(t *testing.T) {
	p := newPlugin(t, t.TempDir(), nil)
	sb := deploy(t, p, testSpec())
	pidFile := filepath.Join(t.TempDir(), "escaped.pid")
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	res, err := p.Exec(ctx, sb, []string{"sh", "-c", `setsid sh -c 'echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; exec sleep 30' "$0" & while [ ! -s "$0" ]; do sleep 0.05; done; echo 0.5`, pidFile})
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("Exec took %s: it waited on a child outside the group", took)
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "0.5\n" || res.ExitCode != 0 {
		t.Fatalf("Exec = %+v", res)
	}
}
