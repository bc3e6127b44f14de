package cli

import (
	"errors"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/core/transcript"
)

// The port-in-use hint suggests a port that is free, on the same host, and
// :0; never the busy port's neighbour, which may be busy too.
func TestListenErrorSuggestsAFreePort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	// The neighbour is taken too, as in the report that asked for this.
	next, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(busy.Addr().(*net.TCPAddr).Port+1)))
	if err == nil {
		defer next.Close()
	}
	_, lerr := net.Listen("tcp", busy.Addr().String())
	msg := listenError(busy.Addr().String(), lerr).Error()
	m := regexp.MustCompile(`e\.g\. --addr 127\.0\.0\.1:(\d+) \(free just now\), or --addr 127\.0\.0\.1:0 `).FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("hint: %s", msg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+m[1])
	if err != nil {
		t.Fatalf("the suggested port %s is not free: %v (%s)", m[1], err, msg)
	}
	ln.Close()
}

// A short token is warned about by its length, never shown.
func TestShortTokenWarning(t *testing.T) {
	for token, want := range map[string]string{
		"hunter2":                          "the token has 7 characters",
		"0123456789abcdef0123456789abcde":  "the token has 31 characters",
		"0123456789abcdef0123456789abcdef": "",
	} {
		got := shortTokenWarning(token)
		if (want == "") != (got == "") || !strings.Contains(got, want) || (got != "" && strings.Contains(got, token)) {
			t.Errorf("shortTokenWarning(%q) = %q, want %q", token, got, want)
		}
	}
}

// serve warns about threads only for sandboxes that run envs on this
// machine, and only past a bound: as many envs as kernel.pid_max allows
// tasks pass it whatever each env holds; one env passes nothing.
func TestThreadWarning(t *testing.T) {
	if _, err := os.Stat("/proc/sys/kernel/pid_max"); err != nil {
		t.Skip("no /proc/sys/kernel/pid_max here")
	}
	b, _ := os.ReadFile("/proc/sys/kernel/pid_max")
	pidMax, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if w := threadWarning("local", pidMax); !strings.Contains(w, "this machine may run out of threads") || !strings.Contains(w, "kernel.pid_max is") {
		t.Errorf("local, %d envs: %q", pidMax, w)
	}
	for _, sb := range []string{"ecs", "k8s"} {
		if w := threadWarning(sb, pidMax); w != "" {
			t.Errorf("%s: %q", sb, w)
		}
	}
	if w := threadWarning("local", 1); w != "" {
		t.Errorf("local, 1 env: %q", w)
	}
}

// A --record directory another server holds gets a hint about that, not
// the one for an unwritable directory.
func TestRecordDirError(t *testing.T) {
	dir := t.TempDir()
	w, err := transcript.NewWriter(transcript.WriterOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	_, err = transcript.NewWriter(transcript.WriterOptions{Dir: dir})
	var de *transcript.DirError
	if !errors.As(err, &de) {
		t.Fatalf("second writer: %v", err)
	}
	msg := recordDirError(dir, de).Error()
	if !strings.Contains(msg, "is in use by another agentenv serve") || !strings.Contains(msg, "--record "+dir+"-2), or stop the other server first") || strings.Contains(msg, "can write to") {
		t.Errorf("in use: %s", msg)
	}
	unwritable := &transcript.DirError{Dir: "/x", Reason: "cannot be made", Err: errors.New("not a directory")}
	if msg := recordDirError("/x", unwritable).Error(); !strings.Contains(msg, "give a directory agentenv can write to") {
		t.Errorf("unwritable: %s", msg)
	}
}
