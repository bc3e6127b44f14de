package main

// examples/harbor on the Kubernetes sandbox: the tasks' images built by
// Docker and imported into the test cluster's node, agentenv's terminal
// from a FROM-scratch terminal image, and `agentenv harbor check --sandbox
// k8s` playing each task with its oracle (reward 1) and with no action.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/oracle"
	"github.com/agentenv/agentenv/internal/k8scluster"
)

// harborTerminalRef is the terminal image the k8s sandbox copies from.
const harborTerminalRef = "agentenv-e2e/terminal:1"

var (
	harborK8sOnce sync.Once
	harborK8sErr  error
)

// harborK8s is the test cluster with examples/harbor's images (built by
// Docker FROM the tests' base image) and the terminal image imported, and
// a namespace of the test's own.
func harborK8s(t *testing.T) (*k8scluster.Cluster, string) {
	t.Helper()
	c := k8scluster.Require(t)
	env := harborEnv(t) // Docker, the base image, the terminal binary
	bin := strings.TrimPrefix(env[0], "AGENTENV_TERMINAL_BINARY=")
	harborK8sOnce.Do(func() {
		harborK8sErr = importHarbor(c, bin)
	})
	if harborK8sErr != nil {
		t.Fatalf("examples/harbor's images on the cluster: %v", harborK8sErr)
	}
	return c, c.Namespace(t, "harbor-k8s")
}

func importHarbor(c *k8scluster.Cluster, terminalBin string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "agentenv-harbor-k8s")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// The image holds the binary alone, at /agentenv-terminal.
	data, err := os.ReadFile(terminalBin)
	if err != nil {
		return err
	}
	bin := filepath.Join(dir, "agentenv-terminal")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		return err
	}
	if err := c.ImportImage(ctx, bin, harborTerminalRef); err != nil {
		return err
	}
	b, err := bundle.Load(harborExample, bundle.Options{})
	if err != nil {
		return err
	}
	built := map[string]bool{}
	for _, e := range b.Envs {
		if built[e.Image] {
			continue
		}
		built[e.Image] = true
		if out, err := exec.CommandContext(ctx, "docker", "build", "-q", "-t", e.Image, e.Dir).CombinedOutput(); err != nil {
			return fmt.Errorf("docker build %s: %w: %s", e.Dir, err, out)
		}
		if err := c.ImportDockerImage(ctx, e.Image); err != nil {
			return err
		}
	}
	return nil
}

// The oracle check of examples/harbor on Kubernetes: each task's oracle
// scores 1 and doing nothing less, through the same engine and verifier
// as serve, and no pod or policy is left. The offline task is left out:
// on Kubernetes a task without internet loses its egress by NetworkPolicy,
// not its default route, and that task's test counts routes
// (docs/kubernetes.md, "Harbor tasks").
func TestHarborCheckOnK8s(t *testing.T) {
	c, ns := harborK8s(t)
	cfg := k8sConfig(t, c, ns, map[string]any{"run_as_user": nil, "terminal_image": harborTerminalRef,
		"cpu_request_fraction": 0.1, "memory_request_fraction": 0.25})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, agentenv(t), "harbor", "check", harborExample, "--tasks", "[htp]*",
		"--sandbox", "k8s", "--sandbox-config", cfg, "--json")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("harbor check --sandbox k8s: %v\n%s\n%s", err, out, stderr)
	}
	var rows []oracle.Row
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var r oracle.Row
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	var names []string
	for _, r := range rows {
		names = append(names, r.Task)
		if !r.OK() || !r.Built || r.Deploy <= 0 || r.Verify <= 0 {
			t.Errorf("row %+v", r)
		}
	}
	sort.Strings(names)
	if strings.Join(names, " ") != "hello-file py-fizzbuzz two-scores" {
		t.Errorf("tasks checked: %v", names)
	}
	waitK8sGone(t, c, ns, time.Minute)
}

// A Harbor dataset through agentenv serve --sandbox k8s: hello-file played
// over the WebSocket protocol by its oracle (1) and by no action (0), the
// shell calls in the transcript, SIGTERM leaving no pod, then a SIGKILL
// with a live episode whose pod the restart reaps.
func TestHarborServeOnK8s(t *testing.T) {
	c, ns := harborK8s(t)
	cfg := k8sConfig(t, c, ns, map[string]any{"run_as_user": nil, "terminal_image": harborTerminalRef,
		"cpu_request_fraction": 0.1, "memory_request_fraction": 0.25})
	b, err := bundle.Load(harborExample, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	task, _ := b.Task("hello-file")
	reply, err := oracle.SolutionReply(task.Harbor.SolutionDir, task.Harbor.SolutionEnv)
	if err != nil {
		t.Fatal(err)
	}
	rec := t.TempDir()
	args := []string{"--sandbox", "k8s", "--sandbox-config", cfg, "--reward", "mean", "--tool-format", "hermes"}
	addr := freeAddr(t)
	sv := startServe(t, harborExample, addr, "", nil, append(args, "--record", rec)...)
	cl := dialServe(t, addr, "")
	if final, out := playHarbor(t, cl, "hello-file", reply); final["reward"] != 1.0 {
		t.Errorf("the oracle on k8s: %v\n%s", final, out)
	}
	if final, _ := playHarbor(t, cl, "hello-file", ""); final["reward"] != 0.0 {
		t.Errorf("no action on k8s: %v", final)
	}
	if code := sv.signalAndWait(t, syscall.SIGTERM, time.Minute); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, sv.log)
	}
	waitK8sGone(t, c, ns, time.Minute)
	files, _ := filepath.Glob(filepath.Join(rec, "*.jsonl"))
	var all strings.Builder
	for _, f := range files {
		data, _ := os.ReadFile(f)
		all.Write(data)
	}
	for _, want := range []string{`"name":"shell"`, "bash /solution/solve.sh", "exit code: 0"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("the transcript lacks %q", want)
		}
	}

	sv = startServe(t, harborExample, addr, "", nil, args...)
	dialServe(t, addr, "").observation(`{"type":"reset","data":{"task_id":"hello-file"}}`)
	sv.signalAndWait(t, syscall.SIGKILL, 10*time.Second)
	if pods, _ := k8sObjects(t, c, ns); len(pods) != 1 {
		t.Fatalf("SIGKILL left %d pods, want the live episode's: the test proves nothing", len(pods))
	}
	again := startServe(t, harborExample, addr, "", nil, args...)
	if pods, _ := k8sObjects(t, c, ns); len(pods) != 0 {
		t.Errorf("%d pods live after the restart", len(pods))
	}
	waitK8sGone(t, c, ns, time.Minute)
	if code := again.signalAndWait(t, syscall.SIGTERM, time.Minute); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
