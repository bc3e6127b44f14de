package k8s

// Terminal envs (Harbor tasks) on the real test cluster: a task's image
// FROM the Debian base runs agentenv's terminal, copied in from a
// FROM-scratch terminal image by the init container.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/agentenv/internal/k8scluster"
	"github.com/agentenv/agentenv/internal/servetest"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

const (
	// harborBase is the Harbor tests' base image (scripts/harbor-base-image.sh).
	harborBase = "agentenv/harbor-base:bookworm"
	// taskRef is the test task's image, FROM harborBase.
	taskRef = "agentenv-k8s-test/harbor-task:1"
	// terminalRef is the terminal image: the static binary alone.
	terminalRef = "agentenv-k8s-test/terminal:1"
	// taskGreeting is what the task's image holds in /app/greeting.txt.
	taskGreeting = "hello from the task image"
)

var (
	terminalImagesOnce sync.Once
	terminalImagesErr  error
)

// terminalImages imports the terminal image (agentenv-terminal built
// static, alone at /agentenv-terminal) and a task image built by Docker
// FROM harborBase into the node, once per test binary.
func terminalImages(t *testing.T, c *k8scluster.Cluster) {
	t.Helper()
	if err := exec.Command("docker", "image", "inspect", harborBase).Run(); err != nil {
		sdktest.Missing(t, "Docker with the image "+harborBase, "the task image is built FROM it ("+err.Error()+")",
			"start Docker, then bash scripts/harbor-base-image.sh")
	}
	bin := servetest.TerminalBinary(t)
	terminalImagesOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		dir, err := os.MkdirTemp("", "agentenv-k8s-task")
		if err != nil {
			terminalImagesErr = err
			return
		}
		defer os.RemoveAll(dir)
		// The image's binary must be named agentenv-terminal: copy it.
		data, err := os.ReadFile(bin)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "agentenv-terminal"), data, 0o755)
		}
		if err == nil {
			err = c.ImportImage(ctx, filepath.Join(dir, "agentenv-terminal"), terminalRef)
		}
		if err != nil {
			terminalImagesErr = err
			return
		}
		ctxDir := filepath.Join(dir, "task")
		dockerfile := "FROM " + harborBase + "\nCOPY greeting.txt /app/greeting.txt\nWORKDIR /app\n"
		if err := os.MkdirAll(ctxDir, 0o755); err != nil {
			terminalImagesErr = err
			return
		}
		for name, body := range map[string]string{"Dockerfile": dockerfile, "greeting.txt": taskGreeting + "\n"} {
			if err := os.WriteFile(filepath.Join(ctxDir, name), []byte(body), 0o644); err != nil {
				terminalImagesErr = err
				return
			}
		}
		if out, err := exec.CommandContext(ctx, "docker", "build", "-q", "-t", taskRef, ctxDir).CombinedOutput(); err != nil {
			terminalImagesErr = fmt.Errorf("docker build: %w: %s", err, out)
			return
		}
		terminalImagesErr = c.ImportDockerImage(ctx, taskRef)
	})
	if terminalImagesErr != nil {
		t.Fatalf("the terminal and task images: %v", terminalImagesErr)
	}
}

func taskSpec(labels map[string]string) sandbox.Spec {
	return sandbox.Spec{Env: "hello-file", Image: taskRef, Port: 18765, CPU: 0.5, MemoryMB: 256, StorageMB: 256,
		EnvVars: map[string]string{"TASK_VAR": "from-the-task"}, NoInternet: true,
		Terminal: &sandbox.Terminal{Workdir: "/app"}, Labels: labels}
}

// shell calls the terminal's shell tool and returns its text.
func shell(t *testing.T, endpoint, command string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "sandbox-k8s-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint + "/mcp", DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("MCP connect to %s: %v", endpoint, err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "shell", Arguments: map[string]any{"command": command}})
	if err != nil {
		t.Fatalf("shell %q: %v", command, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError {
		t.Fatalf("shell %q: a tool error: %s", command, text.String())
	}
	return text.String()
}

// A Harbor task's env on a real cluster: its own image, unchanged, runs
// the injected terminal in its workdir as root with a writable root; the
// model's shell answers over MCP; the pod has no egress; Terminate
// leaves nothing.
func TestClusterTerminal(t *testing.T) {
	c := k8scluster.Require(t)
	terminalImages(t, c)
	ns := c.Namespace(t, "sbk8s-term")
	p := configured(t, clusterConfig(t, c.Info.Kubeconfig, ns, map[string]any{
		"run_as_user": nil, "terminal_image": terminalRef, "server_cidrs": []string{c.Info.HostIP + "/32"}}))
	ctx := context.Background()
	sb, err := p.Deploy(ctx, taskSpec(map[string]string{sandbox.LabelServer: "srv", sandbox.LabelTask: "harbor/hello-file", sandbox.LabelDeploy: "d1"}))
	if err != nil {
		t.Fatal(err)
	}
	out := shell(t, sb.Endpoint, `cat greeting.txt; echo "pwd=$(pwd) uid=$(id -u) var=$TASK_VAR"; echo made > /etc/agentenv-wrote-here && cat /etc/agentenv-wrote-here; ls /tmp/ >/dev/null && echo tmp-ok`)
	for _, want := range []string{taskGreeting, "pwd=/app uid=0 var=from-the-task", "made", "tmp-ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("shell output lacks %q:\n%s", want, out)
		}
	}
	// The binary is read-only in the env: the model cannot replace it.
	if out := shell(t, sb.Endpoint, `echo x > /.agentenv/agentenv-terminal && echo replaced || echo refused`); !strings.Contains(out, "refused") {
		t.Errorf("writing over the terminal binary: %s", out)
	}
	pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, sb.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Status.InitContainerStatuses) != 1 || pod.Status.InitContainerStatuses[0].State.Terminated == nil ||
		pod.Status.InitContainerStatuses[0].State.Terminated.ExitCode != 0 {
		t.Errorf("init container status: %+v", pod.Status.InitContainerStatuses)
	}
	np, err := c.Client.NetworkingV1().NetworkPolicies(ns).Get(ctx, sb.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(np.Spec.Egress) != 0 {
		t.Errorf("a no-internet env's policy allows egress: %+v", np.Spec.Egress)
	}
	if err := p.Terminate(ctx, sb); err != nil {
		t.Fatal(err)
	}
	waitClean(t, c, ns, time.Minute)
}

// A terminal env past its storage_mb is evicted by the kubelet: the pod
// ends, and its Evicted event names the ephemeral-storage limit.
func TestClusterTerminalStorageLimit(t *testing.T) {
	c := k8scluster.Require(t)
	terminalImages(t, c)
	ns := c.Namespace(t, "sbk8s-termdisk")
	p := configured(t, clusterConfig(t, c.Info.Kubeconfig, ns, map[string]any{
		"run_as_user": nil, "terminal_image": terminalRef, "network_policy": false}))
	ctx := context.Background()
	spec := taskSpec(nil)
	spec.StorageMB = 32
	sb, err := p.Deploy(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = p.Terminate(ctx, sb)
		waitClean(t, c, ns, time.Minute)
	}()
	sel := metav1.ListOptions{FieldSelector: "metadata.name=" + sb.ID}
	pods, err := c.Client.CoreV1().Pods(ns).Watch(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	defer pods.Stop()
	events, err := c.Client.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + sb.ID})
	if err != nil {
		t.Fatal(err)
	}
	defer events.Stop()
	shell(t, sb.Endpoint, `head -c 64M /dev/zero > /app/big; ls -l /app/big`)
	timeout := time.After(2 * time.Minute)
	var ended, evicted bool
	for !ended || !evicted {
		select {
		case ev, ok := <-pods.ResultChan():
			if !ok {
				t.Fatal("the watch of the pod ended")
			}
			if pod, ok := ev.Object.(*corev1.Pod); ok {
				// The kubelet stops the terminal with SIGTERM, on which it
				// exits 0: the pod may end Succeeded.
				ended = pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
			}
		case ev, ok := <-events.ResultChan():
			if !ok {
				t.Fatal("the watch of the pod's events ended")
			}
			if e, ok := ev.Object.(*corev1.Event); ok && e.Reason == "Evicted" {
				if !strings.Contains(e.Message, "ephemeral") {
					t.Fatalf("evicted, not for its storage: %s", e.Message)
				}
				t.Logf("evicted: %s", e.Message)
				evicted = true
			}
		case <-timeout:
			t.Fatalf("2 minutes after writing 64 MiB with a 32 MiB storage limit: pod ended %v, evicted %v", ended, evicted)
		}
	}
}

// Deploys that cannot run a terminal fail at once naming terminal_image:
// none configured, and an image without the terminal in it.
func TestClusterTerminalErrors(t *testing.T) {
	c := k8scluster.Require(t)
	listener(t, c)
	ns := c.Namespace(t, "sbk8s-termerr")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spec := taskSpec(nil)
	spec.Image = listenerRef // never started: the init container fails first
	_, err := configured(t, clusterConfig(t, c.Info.Kubeconfig, ns, nil)).Deploy(ctx, spec)
	if err == nil || !strings.Contains(err.Error(), "terminal_image is not set") {
		t.Errorf("no terminal_image: %v", err)
	}
	start := time.Now()
	_, err = configured(t, clusterConfig(t, c.Info.Kubeconfig, ns, map[string]any{"terminal_image": listenerRef})).Deploy(ctx, spec)
	if err == nil || !strings.Contains(err.Error(), "terminal_image must hold the static agentenv-terminal binary at /agentenv-terminal") ||
		!strings.Contains(err.Error(), "pod "+ns+"/k8s-") {
		t.Errorf("a terminal_image without the terminal: %v", err)
	}
	t.Logf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
	if took := time.Since(start); took > time.Minute {
		t.Errorf("took %s: a failure must not wait for the deadline", took)
	}
	waitClean(t, c, ns, time.Minute)
}
