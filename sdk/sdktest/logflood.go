package sdktest

import (
	"os"
	"strings"
	"testing"
	"time"
)

// FloodCommand is the shell line a log-cap test runs beside its env, into
// the same output: 256 MiB of lines, then LAST-LINE. Run it as
// sh -c FloodCommand ENV-BINARY.
const FloodCommand = `(yes 'a line of env output' | head -c 268435456; echo LAST-LINE) & exec "$0"`

// floodBytes is how much FloodCommand writes before its last line.
const floodBytes = 256 << 20

// WaitLogCapped watches the env log at path while FloodCommand floods it,
// and fails t unless the log ends with the flood's last line, held within
// 1 MiB under a line saying it was cut, and never grew past half the flood.
// A cut in progress may be seen for a moment (on Linux the head is gone a
// moment before the cut line is written over the new start), so only the
// log's settled state is judged.
func WaitLogCapped(t testing.TB, path string) {
	t.Helper()
	var biggest int64
	deadline := time.Now().Add(2 * time.Minute)
	for {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		biggest = max(biggest, int64(len(data)))
		ended := strings.Contains(string(data), "LAST-LINE") && len(data) <= 1<<20
		marked := strings.Contains(string(data), "bytes of this log were cut")
		if ended && marked {
			break
		}
		if time.Now().After(deadline) {
			if ended {
				t.Fatalf("the log ends the flood without saying it was cut: %.200q", data)
			}
			t.Fatalf("the flood's log holds %d bytes and no end yet", len(data))
		}
		time.Sleep(20 * time.Millisecond) // a poll interval: the env writes on its own
	}
	if biggest > floodBytes/2 {
		t.Fatalf("the log reached %d MiB of a %d MiB flood", biggest>>20, floodBytes>>20)
	}
}
