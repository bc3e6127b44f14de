package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/internal/servetest"
	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/agentenv/agentenv/client"
	"github.com/agentenv/agentenv/plugins/sandbox-ecs/standin"
	"github.com/agentenv/agentenv/plugins/sandbox-ecs/standin/standintest"
)

// gridsimImage is GridSim's env image, as its env.toml names it.
const gridsimImage = "agentenv-gridsim-env:1"

// ecsStandin starts the ECS stand-in on Docker with GridSim's env image
// built (FROM scratch, from its Dockerfile), points the AWS SDK's default
// chain at test credentials, and writes a sandbox config reaching it.
func ecsStandin(t *testing.T) (*standintest.Server, string) {
	t.Helper()
	d := standintest.Docker(t)
	env := filepath.Join(gridsimBundle, "envs", "gridsim")
	ctxDir := t.TempDir()
	if err := servetest.BuildStatic(env, ".", filepath.Join(ctxDir, "bin", "gridsim-env")); err != nil {
		t.Fatal(err)
	}
	df, err := os.ReadFile(filepath.Join(env, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), df, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := d.BuildImage(ctx, ctxDir, gridsimImage, "bin/gridsim-env"); err != nil {
		t.Fatal(err)
	}
	s := standintest.Start(t, d, standin.Options{StopGrace: time.Second})
	standintest.Credentials(t)
	cfg, _ := json.Marshal(map[string]any{
		"region": "us-east-1", "cluster": "default", "subnets": []string{"subnet-0standin"},
		"security_groups": []string{"sg-0standin"}, "endpoint_url": s.URL, "launch_rate": 50, "launch_burst": 8,
	})
	path := filepath.Join(t.TempDir(), "ecs.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	return s, path
}

// waitStopped waits until the stand-in has no live task.
func waitStopped(t *testing.T, s *standintest.Server, within time.Duration) {
	t.Helper()
	wait.For(t, "the stand-in to have no live task", func() error {
		if live := s.Live(); len(live) > 0 {
			return fmt.Errorf("tasks still live: %+v", live)
		}
		return nil
	}, wait.Timeout(within))
}

// sessionCaller plays GridSim's tools through a served session: each call
// is a hermes tool call in a reply, its answer the tool message.
type sessionCaller struct{ s *client.Session }

func (c sessionCaller) Call(ctx context.Context, tool string, args any) (string, bool, error) {
	call, err := json.Marshal(map[string]any{"name": tool, "arguments": args})
	if err != nil {
		return "", false, err
	}
	res, err := c.s.Step(ctx, "<tool_call>\n"+string(call)+"\n</tool_call>")
	if err != nil {
		return "", false, err
	}
	for _, m := range res.Observation.Messages {
		if m.Role == "tool" {
			return m.Content, false, nil
		}
	}
	return "", false, fmt.Errorf("no tool message in %+v", res.Observation)
}

// GridSim end to end on ECS: agentenv serve --sandbox ecs --reward mean
// against the stand-in, each episode's env a task whose container runs
// GridSim's image; the optimal policy scores 1 on every day; SIGTERM
// stops every task. The AWS credentials reach the plugin only through
// the server's environment, and never show in its log.
func TestServeGridsimOnECS(t *testing.T) {
	s, cfg := ecsStandin(t)
	addr := freeAddr(t)
	sv := startServe(t, gridsimBundle, addr, "", nil, "--sandbox", "ecs", "--sandbox-config", cfg, "--reward", "mean")
	const days = 4
	var wg sync.WaitGroup
	errs := make(chan error, days)
	for i := range days {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- playOptimal(addr, i)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := len(s.Tasks()); n != days {
		t.Errorf("%d tasks ran for %d episodes", n, days)
	}
	if code := sv.signalAndWait(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, sv.log)
	}
	waitStopped(t, s, 10*time.Second)
	if log := sv.log.String(); strings.Contains(log, "standin-secret-key") || strings.Contains(log, "AKIDSTANDIN") {
		t.Error("the AWS credentials appear in the server's log")
	}
}

// playOptimal plays eval day i with the optimal schedule and checks that
// it scores 1.
func playOptimal(addr string, i int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sess, taskID, err := dialReset(ctx, addr, "", i)
	if err != nil {
		return err
	}
	defer sess.Close()
	return scoreOptimal(ctx, sess, taskID)
}

// A server killed with SIGKILL leaves its tasks running; the next serve of
// the same bundle and address lists them by its StartedBy and tags and
// stops every one before serving.
func TestServeOnECSRestartReapsAfterSigkill(t *testing.T) {
	s, cfg := ecsStandin(t)
	addr := freeAddr(t)
	args := []string{"--sandbox", "ecs", "--sandbox-config", cfg, "--reward", "mean"}
	sv := startServe(t, gridsimBundle, addr, "", nil, args...)
	for i := range 3 {
		c := dialServe(t, addr, "")
		c.observation(`{"type":"reset","data":{"split":"eval","index":` + fmt.Sprint(i) + `}}`)
	}
	if live := s.Live(); len(live) != 3 {
		t.Fatalf("%d live tasks for 3 live episodes", len(live))
	}
	sv.signalAndWait(t, syscall.SIGKILL, 10*time.Second)
	if live := s.Live(); len(live) != 3 {
		t.Fatalf("SIGKILL left %d of 3 tasks: the test proves nothing", len(live))
	}
	again := startServe(t, gridsimBundle, addr, "", nil, args...)
	if live := s.Live(); len(live) != 0 {
		t.Errorf("tasks still live after the restart: %+v", live)
	}
	if !strings.Contains(again.log.String(), "reaped sandboxes an earlier run left behind") {
		t.Errorf("restart did not log the reaping:\n%s", again.log)
	}
	if code := again.signalAndWait(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// Faults injected in the stand-in reach the trainer as DEPLOY_FAILED with
// ECS's reason (the operator's --error-detail: by default the reason is in
// the server's log), and leave no task running.
func TestServeOnECSFaults(t *testing.T) {
	s, cfg := ecsStandin(t)
	addr := freeAddr(t)
	sv := startServe(t, gridsimBundle, addr, "", nil, "--sandbox", "ecs", "--sandbox-config", cfg, "--reward", "mean", "--error-detail")
	for _, tc := range []struct {
		fault standin.Faults
		want  string
	}{
		{standin.Faults{Capacity: 1}, "Capacity is unavailable"},
		{standin.Faults{StopBeforeRunning: 1}, "CannotPullContainerError"},
	} {
		s.Inject(tc.fault)
		c := dialServe(t, addr, "")
		typ, data, err := c.call(`{"type":"reset","data":{"split":"eval","index":0}}`)
		msg := fmt.Sprint(data)
		t.Logf("reset under %+v: %s", tc.fault, msg)
		if err != nil || typ != "error" || !strings.Contains(msg, "DEPLOY_FAILED") || !strings.Contains(msg, tc.want) {
			t.Errorf("reset under %+v: %s %s %v; want DEPLOY_FAILED naming %q", tc.fault, typ, msg, err, tc.want)
		}
		waitStopped(t, s, 10*time.Second)
	}
	if code := sv.signalAndWait(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
