package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An env flooding its output keeps its env.log under log_max_mb while it
// writes, and the log keeps its end.
func TestEnvLogIsCapped(t *testing.T) {
	needBwrap(t)
	const flood = 256 << 20
	dir := stateDir(t)
	p := newTestPlugin(t, dir, map[string]any{"log_max_mb": 1})
	spec := testSpec()
	spec.Command = []string{"sh", "-c", `(yes 'a line of env output' | head -c 268435456; echo LAST-LINE) & exec "$0" testenv`, filepath.Join(envDir, "bin", "testenv")}
	sb := deploy(t, p, spec)
	path := filepath.Join(sandboxRoot(dir, sb.ID), "env.log")
	var biggest int64
	deadline := time.Now().Add(2 * time.Minute)
	for {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		biggest = max(biggest, int64(len(data)))
		if strings.Contains(string(data), "LAST-LINE") && len(data) <= 1<<20 {
			if !strings.Contains(string(data), "bytes of this log were cut") {
				t.Fatalf("the log ends the flood without saying it was cut: %.200q", data)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the flood's log holds %d bytes and no end yet", len(data))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if biggest > flood/2 {
		t.Fatalf("the log reached %d MiB of a %d MiB flood", biggest>>20, flood>>20)
	}
}
