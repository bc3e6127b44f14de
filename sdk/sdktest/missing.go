package sdktest

import (
	"fmt"
	"os"
	"testing"
)

// SkipsFileVar names a file that Missing appends one line to per skipped
// test. `make test` sets it and prints the file at the end, since go test
// shows nothing of a package whose tests passed or skipped unless -v.
const SkipsFileVar = "AGENTENV_TEST_SKIPS"

// Missing ends a test that needs an outside part this machine lacks. Under
// CI=true it fails (CI installs every part). Elsewhere it skips loudly:
// the part, what is missing and how to install it go to the test log, to
// stderr (seen with go test -v or in local directory mode) and to the file
// $AGENTENV_TEST_SKIPS names, if any. what names the part ("Docker
// engine"), why what went wrong, install the fix ("apt-get install ...").
func Missing(t testing.TB, what, why, install string) {
	t.Helper()
	msg := fmt.Sprintf("needs %s: %s; install: %s", what, why, install)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: CI must have it)", msg)
		return // Fatalf does not return; a stand-in TB's may
	}
	t.Skip(note(t.Name(), msg))
}

// MissingPart is Missing for a part of a test: under CI=true the test
// fails; elsewhere the test goes on without that part, which is logged,
// printed and recorded as Missing does.
func MissingPart(t testing.TB, what, why, install string) {
	t.Helper()
	msg := fmt.Sprintf("needs %s: %s; install: %s", what, why, install)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: CI must have it)", msg)
		return
	}
	t.Log(note(t.Name()+" (in part)", msg))
}

// note prints and records one skip line and returns it.
func note(test, msg string) string {
	line := fmt.Sprintf("SKIP %s: %s (CI=true fails instead)", test, msg)
	fmt.Fprintln(os.Stderr, line)
	if path := os.Getenv(SkipsFileVar); path != "" {
		// One short write with O_APPEND: lines from concurrent test
		// binaries do not interleave.
		if f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
			f.WriteString(line + "\n")
			f.Close()
		}
	}
	return line
}
