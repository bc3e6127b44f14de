package ecs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"

	"github.com/agentenv/agentenv/sdk/sandbox"

	"github.com/agentenv/agentenv/sdk/sdktest"
)

// motoServer starts Python moto's server mode on loopback for the test: an
// ECS emulator written by others, to check the plugin's requests against.
// Without moto the test is skipped, except under CI=true.
func motoServer(t *testing.T) string {
	t.Helper()
	if out, err := exec.Command("python3", "-c", "import moto.server, flask, flask_cors").CombinedOutput(); err != nil {
		sdktest.Missing(t, "Python moto's server (an ECS emulator to check requests against)",
			fmt.Sprintf("%v: %s", err, strings.TrimSpace(string(out))), "pip install 'moto[server]' flask flask-cors")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	var log strings.Builder
	cmd := exec.Command("python3", "-m", "moto.server", "-H", "127.0.0.1", "-p", port)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	// Cleanups run last first: this one after the kill below, once the
	// process's output is all copied, so reading the log races nothing.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the moto server's log:\n%s", log.String())
		}
	})
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	wait.For(t, "the moto server to listen", func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-done:
			t.Fatal("moto server exited") // its log is printed at cleanup
		default:
		}
		return err // its log is printed at cleanup
	}, wait.Every(100*time.Millisecond))
	return "http://" + addr
}

// The plugin's requests as moto reads them: task definitions registered
// once and found again by their tag, List by StartedBy, Terminate of a task
// ECS does not know. moto's RunTask for Fargate with awsvpc crashes (a
// TypeError in moto, answered as HTTP 500), so Deploy is checked only to
// fail with that reply and leave nothing; the stand-in covers the rest.
func TestRequestsAgainstMoto(t *testing.T) {
	url := motoServer(t)
	ctx := context.Background()
	p := newPlugin(t, url, map[string]any{"max_attempts": 1})
	s, _ := p.setup()
	if _, err := s.api.(*ecs.Client).CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("default")}); err != nil {
		t.Fatal(err)
	}
	if err := p.Prepare(ctx, spec("listener:1", nil)); err != nil {
		t.Fatalf("Prepare against moto: %v", err)
	}
	again := newPlugin(t, url, map[string]any{"max_attempts": 1})
	if err := again.Prepare(ctx, spec("listener:1", nil)); err != nil {
		t.Fatal(err)
	}
	a := p.taskDefs[prepareKey(spec("listener:1", nil))].arn
	b := again.taskDefs[prepareKey(spec("listener:1", nil))].arn
	if a == "" || a != b || !strings.HasSuffix(a, "task-definition/agentenv-listener:1") {
		t.Fatalf("task definitions %q and %q: the second start must reuse the first's revision", a, b)
	}
	got, err := p.List(ctx, map[string]string{sandbox.LabelServer: "srv"})
	if err != nil || len(got) != 0 {
		t.Fatalf("List = %v, %v", got, err)
	}
	gone := sandbox.Sandbox{ID: "ecs-gone", State: state{Cluster: "default",
		Task: "arn:aws:ecs:us-east-1:123456789012:task/default/0123456789abcdef0123456789abcdef"}.encode()}
	if err := p.Terminate(ctx, gone); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Terminate of an unknown task: %v, want ErrNotFound", err)
	}
	_, err = p.Deploy(ctx, spec("listener:1", labels("srv", "ep")))
	if err == nil {
		t.Fatal("moto ran a Fargate awsvpc task: its RunTask is fixed; check Deploy against it fully")
	}
	if !strings.Contains(err.Error(), "RunTask") || !strings.Contains(err.Error(), "500") {
		t.Errorf("Deploy against moto: %v, want its RunTask's HTTP 500", err)
	}
}
