//go:build unix

package hostenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

func TestResolveCommand(t *testing.T) {
	for _, tc := range []struct {
		name, dir string
		argv      []string
		want      []string
	}{
		{"bare name left for PATH", "/env", []string{"python3", "x.py"}, []string{"python3", "x.py"}},
		{"relative path joined", "/env", []string{"./bin/serve", "-v"}, []string{"/env/bin/serve", "-v"}},
		{"nested relative", "/env", []string{"bin/serve"}, []string{"/env/bin/serve"}},
		{"absolute kept", "/env", []string{"/usr/bin/env"}, []string{"/usr/bin/env"}},
		{"no dir keeps it", "", []string{"./serve"}, []string{"./serve"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.argv)
			got := ResolveCommand(tc.dir, tc.argv)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("ResolveCommand = %q, want %q", got, tc.want)
			}
			if !slices.Equal(tc.argv, in) {
				t.Fatal("ResolveCommand changed its argument")
			}
		})
	}
}

func TestBuild(t *testing.T) {
	for _, tc := range []struct {
		name     string
		build    []string
		timeout  time.Duration
		wantErr  []string // substrings of the error; nil for none
		deadline bool     // the error wraps context.DeadlineExceeded
		marker   bool     // the build wrote its marker in the env's folder
	}{
		{name: "no build", build: nil, timeout: time.Second},
		{name: "runs in the env's folder", build: []string{"sh", "-c", "echo built > marker"}, timeout: 10 * time.Second, marker: true},
		{name: "relative script", build: []string{"./build.sh"}, timeout: 10 * time.Second, marker: true},
		{name: "failure quotes output", build: []string{"sh", "-c", "echo first; echo boom >&2; exit 3"}, timeout: 10 * time.Second,
			wantErr: []string{`building env "e"`, "exit status 3", "; its output ends:\nfirst\nboom"}},
		{name: "missing program", build: []string{"./no-such-build"}, timeout: 10 * time.Second,
			wantErr: []string{`building env "e"`, "no-such-build"}},
		{name: "timeout", build: []string{"sh", "-c", "echo started; sleep 30"}, timeout: 300 * time.Millisecond,
			wantErr: []string{"build_timeout 300ms", "started"}, deadline: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			script := "#!/bin/sh\necho built > marker\n"
			if err := os.WriteFile(filepath.Join(dir, "build.sh"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			spec := sandbox.Spec{Env: "e", Dir: dir, Build: tc.build}
			start := time.Now()
			err := Build(context.Background(), hclog.NewNullLogger(), spec, tc.timeout)
			if took := time.Since(start); took > 20*time.Second {
				t.Fatalf("Build took %v", took)
			}
			if tc.wantErr == nil && err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("error %v, want one containing %q", err, want)
				}
			}
			if got := errors.Is(err, context.DeadlineExceeded); got != tc.deadline {
				t.Fatalf("error wraps DeadlineExceeded = %v, want %v (%v)", got, tc.deadline, err)
			}
			if _, serr := os.Stat(filepath.Join(dir, "marker")); (serr == nil) != tc.marker {
				t.Fatalf("marker written = %v, want %v", serr == nil, tc.marker)
			}
		})
	}
}

// A build cut short takes its whole process group with it, not only the
// command it started.
func TestBuildKillsItsGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	ctx, cancel := context.WithCancel(context.Background())
	spec := sandbox.Spec{Env: "e", Dir: dir, Build: []string{"sh", "-c", `sleep 60 & echo $! > "$0.tmp"; mv "$0.tmp" "$0"; wait`, pidFile}}
	done := make(chan error, 1)
	go func() { done <- Build(ctx, hclog.NewNullLogger(), spec, time.Minute) }()
	var pid int
	wait.For(t, "the build to start its child", func() error {
		data, err := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		return err
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want one wrapping context.Canceled", err)
	}
	gone := false
	t.Cleanup(func() {
		if !gone {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	wait.Until(t, fmt.Sprintf("the build's child %d to end with it", pid), func() bool { return syscall.Kill(pid, 0) != nil })
	gone = true
}

func TestFileTail(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		n             int64
		want          string
	}{
		{"whole small file, trimmed", "line1\nline2\n", 100, "line1\nline2"},
		{"starts at a line", "aaaa\nbbbb\ncccc\n", 8, "cccc"},
		{"one long line kept as cut", "abcdefghij", 4, "ghij"},
		{"empty", "", 10, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if got := FileTail(path, tc.n); got != tc.want {
				t.Fatalf("FileTail(%q, %d) = %q, want %q", tc.content, tc.n, got, tc.want)
			}
		})
	}
	if got := FileTail(filepath.Join(dir, "missing"), 10); got != "" {
		t.Fatalf("FileTail of a missing file = %q", got)
	}
}
