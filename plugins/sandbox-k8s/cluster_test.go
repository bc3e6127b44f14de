package k8s

// Tests on the real cluster of internal/k8scluster (a real API server,
// scheduler, controller manager and kubelet with containerd): they skip
// without one outside CI and fail without one under CI=true.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/agentenv/internal/k8scluster"
	"github.com/agentenv/agentenv/internal/servetest"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

// listenerRef is the test env's image, as imported into the node.
const listenerRef = "agentenv-k8s-test-listener:1"

// listenerPort is the port the test env listens on in its pod.
const listenerPort = 18080

var (
	listenerOnce sync.Once
	listenerErr  error
)

// listener builds testdata/listener as a static binary and imports it into
// the node's containerd as listenerRef, once per test binary.
func listener(t *testing.T, c *k8scluster.Cluster) string {
	t.Helper()
	listenerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agentenv-k8s-listener")
		if err != nil {
			listenerErr = err
			return
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "listener")
		if listenerErr = buildListener(bin); listenerErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		listenerErr = c.ImportImage(ctx, bin, listenerRef)
	})
	if listenerErr != nil {
		t.Fatalf("the listener image: %v", listenerErr)
	}
	return listenerRef
}

// buildListener builds testdata/listener as a static binary at bin.
func buildListener(bin string) error {
	return servetest.BuildStatic("testdata/listener", ".", bin)
}

// clusterConfig is a configuration for namespace ns of the test cluster
// through kubeconfig, merged with extra.
func clusterConfig(t testing.TB, kubeconfig, ns string, extra map[string]any) json.RawMessage {
	t.Helper()
	cfg := map[string]any{
		"kubeconfig": kubeconfig, "namespace": ns,
		// The harness's images name no USER: run them as nobody.
		"run_as_user": 65534, "cpu_request_fraction": 0.1, "memory_request_fraction": 0.5,
		"unschedulable_grace": "2s",
	}
	// The test process is the server, on the host: its envs' policies let
	// it in (the cluster enforces them).
	if cl, err := k8scluster.Open(k8scluster.Locate()); err == nil && cl.Info.HostIP != "" {
		cfg["server_cidrs"] = []string{cl.Info.HostIP + "/32"}
	}
	for k, v := range extra {
		if v == nil {
			delete(cfg, k)
			continue
		}
		cfg[k] = v
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func configured(t testing.TB, raw json.RawMessage) *Plugin {
	t.Helper()
	p := New()
	p.SetLogger(hclog.NewNullLogger())
	if err := p.Configure(context.Background(), raw); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return p
}

func listenerSpec(labels map[string]string) sandbox.Spec {
	return sandbox.Spec{Env: "listener", Image: listenerRef, Port: listenerPort, CPU: 0.1, MemoryMB: 32, Labels: labels}
}

// leftovers lists what the plugin's objects in ns still hold: pods not
// being deleted, NetworkPolicies and Secrets.
func leftovers(t testing.TB, c *k8scluster.Cluster, ns string) []string {
	t.Helper()
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: labelSandbox}
	var out []string
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		out = append(out, "pod "+p.Name)
	}
	nps, err := c.Client.NetworkingV1().NetworkPolicies(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range nps.Items {
		out = append(out, "networkpolicy "+p.Name)
	}
	secs, err := c.Client.CoreV1().Secrets(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secs.Items {
		out = append(out, "secret "+s.Name)
	}
	return out
}

// waitClean waits until nothing of the plugin's is left in ns: the pods
// gone, and the garbage collector done with what they owned.
func waitClean(t testing.TB, c *k8scluster.Cluster, ns string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := leftovers(t, c, ns)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still in namespace %s %v after teardown: %v", ns, within, left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestClusterConformance(t *testing.T) {
	c := k8scluster.Require(t)
	listener(t, c)
	ns := c.Namespace(t, "sbk8s-conf")
	raw := clusterConfig(t, c.Info.Kubeconfig, ns, nil)
	fresh := func() sandbox.Plugin { return configured(t, raw) }
	spec := listenerSpec(nil)
	spec.EnvVars = map[string]string{"TOKEN": "tok-42"}
	sdktest.SandboxConformance(t, fresh(), sdktest.SandboxCase{
		Spec:        spec,
		ExecCommand: []string{"/listener", "echo", "hello"},
		ExecStdout:  "hello token=tok-42",
		Restart:     fresh,
	})
	waitClean(t, c, ns, time.Minute)
}

// What a deploy creates on a real API server: the pod with its variables'
// values out of its spec, and the policy and Secret it owns, which the
// garbage collector removes with it.
func TestClusterIsolationObjects(t *testing.T) {
	c := k8scluster.Require(t)
	listener(t, c)
	ns := c.Namespace(t, "sbk8s-iso")
	p := configured(t, clusterConfig(t, c.Info.Kubeconfig, ns, map[string]any{"server_cidrs": []string{c.Info.HostIP + "/32"}}))
	ctx := context.Background()
	spec := listenerSpec(map[string]string{sandbox.LabelServer: "srv", sandbox.LabelTask: "day/eval-001", sandbox.LabelDeploy: "d1", sandbox.LabelEpisode: "e1"})
	spec.EnvVars = map[string]string{"TOKEN": "s3cret-value"}
	sb, err := p.Deploy(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, sb.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(pod)
	if strings.Contains(string(raw), "s3cret-value") {
		t.Error("the pod object holds the variable's value")
	}
	if len(pod.Spec.SchedulingGates) != 0 || pod.Status.PodIP == "" {
		t.Errorf("pod gates %v, IP %q", pod.Spec.SchedulingGates, pod.Status.PodIP)
	}
	np, err := c.Client.NetworkingV1().NetworkPolicies(ns).Get(ctx, sb.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(np.OwnerReferences) != 1 || np.OwnerReferences[0].UID != pod.UID || np.Spec.Ingress[0].From[1].IPBlock.CIDR != c.Info.HostIP+"/32" || len(np.Spec.Egress) != 0 {
		t.Errorf("policy %+v", np)
	}
	sec, err := c.Client.CoreV1().Secrets(ns).Get(ctx, sb.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(sec.Data["TOKEN"]) != "s3cret-value" || len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].UID != pod.UID {
		t.Errorf("secret %+v", sec.ObjectMeta)
	}
	r, err := p.Exec(ctx, sb, []string{"/listener", "echo", "fail"})
	if err != nil || r.ExitCode != 3 || !strings.Contains(r.Stdout, "token=s3cret-value") || !strings.Contains(r.Stderr, "failing as asked") {
		t.Errorf("Exec of a failing command: %+v, %v", r, err)
	}
	got, err := p.List(ctx, map[string]string{sandbox.LabelTask: "day/eval-001"})
	if err != nil || len(got) != 1 || got[0].Labels[sandbox.LabelTask] != "day/eval-001" {
		t.Errorf("List by a task id label: %+v, %v", got, err)
	}
	if err := p.Terminate(ctx, sb); err != nil {
		t.Fatal(err)
	}
	waitClean(t, c, ns, time.Minute)
}

// Each deploy that cannot succeed fails at once with the reason, naming
// the pod, well before its deadline, and leaves nothing behind.
func TestClusterDeployErrors(t *testing.T) {
	c := k8scluster.Require(t)
	listener(t, c)
	ns := c.Namespace(t, "sbk8s-err")
	p := configured(t, clusterConfig(t, c.Info.Kubeconfig, ns, nil))
	asRoot := configured(t, clusterConfig(t, c.Info.Kubeconfig, ns, map[string]any{"run_as_user": nil}))
	for _, tc := range []struct {
		name   string
		plugin *Plugin
		spec   func(sandbox.Spec) sandbox.Spec
		want   []string
	}{
		{"missing image", p, func(s sandbox.Spec) sandbox.Spec { s.Image = "agentenv-no-such-image:1"; return s },
			[]string{"cannot be pulled", "agentenv-no-such-image"}},
		{"1000 CPUs", p, func(s sandbox.Spec) sandbox.Spec { s.CPU = 10000; return s },
			[]string{"unschedulable", "Insufficient cpu", "lower the env's cpu"}},
		{"over its memory", p, func(s sandbox.Spec) sandbox.Spec {
			s.EnvVars = map[string]string{"LISTENER_ALLOC_MB": "256"}
			return s
		}, []string{"OOMKilled", "memory limit 32Mi", "raise memory_mb"}},
		{"exits at start", p, func(s sandbox.Spec) sandbox.Spec { s.EnvVars = map[string]string{"LISTENER_EXIT": "3"}; return s },
			[]string{"exited with code 3", "listener: exiting 3 as asked"}},
		{"root image", asRoot, func(s sandbox.Spec) sandbox.Spec { return s },
			[]string{"cannot start", "numeric non-root USER"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			start := time.Now()
			_, err := tc.plugin.Deploy(ctx, tc.spec(listenerSpec(nil)))
			took := time.Since(start)
			if err == nil {
				t.Fatal("Deploy succeeded")
			}
			t.Logf("after %s: %v", took.Round(time.Millisecond), err)
			for _, want := range append(tc.want, "pod "+ns+"/k8s-") {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error lacks %q", want)
				}
			}
			if took > time.Minute {
				t.Errorf("took %s: a failure must not wait for the deadline", took)
			}
			waitClean(t, c, ns, time.Minute)
		})
	}
}

// A pod deleted behind the plugin's back is gone for Terminate and Exec.
func TestClusterPodDeletedUnderneath(t *testing.T) {
	c := k8scluster.Require(t)
	listener(t, c)
	ns := c.Namespace(t, "sbk8s-del")
	p := configured(t, clusterConfig(t, c.Info.Kubeconfig, ns, nil))
	ctx := context.Background()
	sb, err := p.Deploy(ctx, listenerSpec(nil))
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, sb.ID, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	waitClean(t, c, ns, time.Minute)
	if _, err := p.Exec(ctx, sb, []string{"/listener", "echo"}); !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), sb.ID) {
		t.Errorf("Exec: %v, want ErrNotFound naming the pod", err)
	}
	if err := p.Terminate(ctx, sb); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Terminate: %v, want ErrNotFound", err)
	}
}

// A pod with a short active_deadline is ended by the kubelet on its own:
// the lease no dead server outlives. The deadline runs from the kubelet's
// admission, so it must outlast a deploy's wait for ready on a busy
// machine (3s did not, on two nodes at load 5).
func TestClusterActiveDeadline(t *testing.T) {
	c := k8scluster.Require(t)
	listener(t, c)
	ns := c.Namespace(t, "sbk8s-deadline")
	p := configured(t, clusterConfig(t, c.Info.Kubeconfig, ns, map[string]any{"active_deadline": "10s"}))
	ctx := context.Background()
	sb, err := p.Deploy(ctx, listenerSpec(map[string]string{sandbox.LabelServer: "gone"}))
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + sb.ID})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	timeout := time.After(time.Minute)
	for ended := false; !ended; {
		select {
		case ev := <-w.ResultChan():
			if pod, ok := ev.Object.(*corev1.Pod); ok {
				ended = pod.Status.Phase == corev1.PodFailed && pod.Status.Reason == "DeadlineExceeded"
			}
		case <-timeout:
			t.Fatal("the pod still runs a minute after its 10s deadline")
		}
	}
	// An ended pod is still listed, so reaping removes it.
	left, err := p.List(ctx, map[string]string{sandbox.LabelServer: "gone"})
	if err != nil || len(left) != 1 {
		t.Fatalf("List after the deadline: %+v, %v", left, err)
	}
	if err := p.Terminate(ctx, left[0]); err != nil {
		t.Fatal(err)
	}
	waitClean(t, c, ns, time.Minute)
}

// No API server at the kubeconfig's address: Configure says so at once.
func TestConfigureUnreachable(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	err := New().Configure(context.Background(), json.RawMessage(`{"kubeconfig":"`+kc+`"}`))
	if err == nil || !strings.Contains(err.Error(), "cannot reach the Kubernetes API server https://127.0.0.1:1") || !strings.Contains(err.Error(), kc) {
		t.Fatalf("Configure: %v", err)
	}
}
