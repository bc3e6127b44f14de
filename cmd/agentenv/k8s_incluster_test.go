package main

// agentenv itself in the real test cluster, as docs/kubernetes.md tells a
// user to run it: its image built by scripts/agentenv-image.sh (FROM
// scratch), deploy/kubernetes applied with kubectl apply -k, trainers
// reaching the server pods, env pods owned by the server pod that made
// them and collected by Kubernetes when it dies. Skipped without a cluster
// or kubectl outside CI, failed without them under CI=true.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentenv/agentenv/client"
	"github.com/agentenv/agentenv/examples/gridsim/baseline"
	"github.com/agentenv/agentenv/internal/k8scluster"
	"github.com/agentenv/agentenv/sdk/sdktest"
	"github.com/agentenv/agentenv/sdk/sdktest/wait"
)

const (
	// inclusterNS is deploy/kubernetes's namespace: the server's and its
	// env pods'.
	inclusterNS = "agentenv"
)

var (
	// The images scripts/agentenv-image.sh builds, pushed to the test
	// cluster's registry under a tag of this run's own: the nodes pull
	// this build, never one an earlier run left in their containerd.
	inclusterTag      = fmt.Sprintf("test-%d", time.Now().UnixNano())
	inclusterImage    = k8scluster.RegistryHost + "/agentenv:" + inclusterTag
	inclusterEnvImage = k8scluster.RegistryHost + "/gridsim-env:" + inclusterTag

	inclusterOnce sync.Once
	inclusterErr  error
)

// inclusterImages builds agentenv's image with scripts/agentenv-image.sh
// and pushes it, and GridSim's env image from the same build, to the
// cluster's registry, which the nodes pull them from.
func inclusterImages(t *testing.T, c *k8scluster.Cluster) {
	t.Helper()
	inclusterOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agentenv-image")
		if err != nil {
			inclusterErr = err
			return
		}
		defer os.RemoveAll(dir)
		root := filepath.Join(dir, "root")
		cmd := exec.Command("bash", "../../scripts/agentenv-image.sh", "--out", root)
		if out, err := cmd.CombinedOutput(); err != nil {
			inclusterErr = fmt.Errorf("scripts/agentenv-image.sh: %v\n%s", err, out)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if inclusterErr = c.PushImage(ctx, root, inclusterImage, "/agentenv"); inclusterErr != nil {
			return
		}
		inclusterErr = c.PushImage(ctx, filepath.Join(root, "bundle/envs/gridsim/bin/gridsim-env"), inclusterEnvImage,
			"/gridsim-env", "--host", "0.0.0.0")
	})
	if inclusterErr != nil {
		t.Fatalf("agentenv's image: %v", inclusterErr)
	}
}

// kubectlFor returns a kubectl runner for the cluster's admin kubeconfig;
// without kubectl the test skips (fails under CI=true).
func kubectlFor(t *testing.T, c *k8scluster.Cluster) func(args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("kubectl")
	if err != nil {
		sdktest.Missing(t, "kubectl (with kustomize: apply -k)", err.Error(), "apt-get install kubectl, or any kubectl 1.14 or later on PATH")
	}
	return func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--kubeconfig", c.Info.Kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
}

// inclusterOverlay writes a kustomization over deploy/kubernetes that
// changes only what the test cluster needs, and returns its folder: the
// images where the nodes have them, GridSim's env image, small requests
// (2-core nodes shared with other tests) and replicas. The server finds
// the API server as in any cluster, at the kubernetes Service.
func inclusterOverlay(t *testing.T, c *k8scluster.Cluster, replicas int) string {
	t.Helper()
	base, err := filepath.Abs("../../deploy/kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	var kust struct {
		Images []struct{ Name, NewName, NewTag string }
	}
	readYAML(t, filepath.Join(base, "kustomization.yaml"), &kust)
	var dep struct {
		Spec struct {
			Template struct {
				Spec struct{ Containers []struct{ Args []string } }
			}
		}
	}
	readYAML(t, filepath.Join(base, "deployment.yaml"), &dep)
	envsArg := slices.IndexFunc(dep.Spec.Template.Spec.Containers[0].Args, func(a string) bool {
		return strings.HasPrefix(a, "--sandbox-config=envs=")
	})
	if len(kust.Images) != 1 || envsArg < 0 {
		t.Fatalf("deploy/kubernetes: want one images: entry and an envs= argument (images %+v, envs at %d)", kust.Images, envsArg)
	}
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	repo, tag, _ := strings.Cut(inclusterImage, ":")
	envs, _ := json.Marshal(map[string]any{"gridsim": map[string]any{"image": inclusterEnvImage, "run_as_user": 65534}})
	ops := []map[string]any{
		{"op": "replace", "path": "/spec/replicas", "value": replicas},
		{"op": "replace", "path": fmt.Sprintf("/spec/template/spec/containers/0/args/%d", envsArg), "value": "--sandbox-config=envs=" + string(envs)},
		{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--sandbox-config=cpu_request_fraction=0.02"},
		{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--sandbox-config=memory_request_fraction=0.25"},
		{"op": "replace", "path": "/spec/template/spec/containers/0/resources/requests", "value": map[string]string{"cpu": "50m", "memory": "64Mi"}},
	}
	patch, _ := json.Marshal(ops)
	k := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
		"resources": []string{rel},
		"images":    []map[string]string{{"name": kust.Images[0].NewName, "newName": repo, "newTag": tag}},
		"patches":   []map[string]any{{"target": map[string]string{"kind": "Deployment", "name": "agentenv"}, "patch": string(patch)}},
	}
	b, _ := json.Marshal(k) // JSON is YAML
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// inclusterDeploy applies deploy/kubernetes (with the overlay) as the docs
// say, waits for the rollout, and returns the token. The namespace is
// deleted, pods and all, when the test ends.
func inclusterDeploy(t *testing.T, c *k8scluster.Cluster, replicas int) string {
	t.Helper()
	kubectl := kubectlFor(t, c)
	inclusterImages(t, c)
	ctx := context.Background()
	// A run killed before its cleanup left the namespace: start clean.
	if err := c.DeleteNamespace(ctx, inclusterNS, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.DeleteNamespace(context.Background(), inclusterNS, 5*time.Minute); err != nil {
			t.Errorf("namespace %s: %v", inclusterNS, err)
		}
	})
	var b [32]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	overlay := inclusterOverlay(t, c, replicas)
	kubectl("apply", "-f", "../../deploy/kubernetes/namespace.yaml")
	kubectl("-n", inclusterNS, "create", "secret", "generic", "agentenv-token", "--from-literal=token="+token)
	out := kubectl("apply", "-k", overlay)
	for _, want := range []string{"namespace/agentenv", "serviceaccount/agentenv", "role.rbac.authorization.k8s.io/agentenv-sandbox",
		"rolebinding.rbac.authorization.k8s.io/agentenv-sandbox", "service/agentenv", "deployment.apps/agentenv"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply -k did not apply %s:\n%s", want, out)
		}
	}
	if _, err := c.Client.CoreV1().Secrets(inclusterNS).Get(ctx, "agentenv-token", metav1.GetOptions{}); err != nil {
		t.Errorf("the token Secret: %v", err)
	}
	kubectl("-n", inclusterNS, "rollout", "status", "deploy/agentenv", "--timeout=5m")
	return token
}

// serverPods are the Deployment's pods that are ready and not being
// deleted.
func serverPods(t *testing.T, c *k8scluster.Cluster) []corev1.Pod {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(inclusterNS).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=agentenv"})
	if err != nil {
		t.Fatal(err)
	}
	var ready []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				ready = append(ready, p)
			}
		}
	}
	return ready
}

// envPods are the env pods in the namespace (not being deleted), by owner
// UID ("" for none).
func envPods(t *testing.T, c *k8scluster.Cluster) map[types.UID][]corev1.Pod {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(inclusterNS).List(context.Background(), metav1.ListOptions{LabelSelector: "agentenv.sandbox"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[types.UID][]corev1.Pod{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		var owner types.UID
		if len(p.OwnerReferences) > 0 {
			owner = p.OwnerReferences[0].UID
		}
		out[owner] = append(out[owner], p)
	}
	return out
}

// openEpisode resets eval day i on the server at addr and returns the
// live session and its task.
func openEpisode(t *testing.T, addr, token string, i int) (*client.Session, string) {
	t.Helper()
	sess, task, err := dialReset(ctxFor(t, 3*time.Minute), addr, token, i)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess, task
}

// dialReset connects to the server at addr and resets eval day i.
func dialReset(ctx context.Context, addr, token string, i int) (*client.Session, string, error) {
	sess, err := client.Dial(ctx, "http://"+addr, client.Options{Token: token})
	if err != nil {
		return nil, "", fmt.Errorf("dial server %s: %w", addr, err)
	}
	res, err := sess.Reset(ctx, client.ResetRequest{Split: "eval", Index: i, ToolFormat: "hermes"})
	if err != nil {
		sess.Close()
		return nil, "", fmt.Errorf("server %s: reset day %d: %w", addr, i, err)
	}
	return sess, res.Observation.TaskID, nil
}

// finishOptimal plays the open episode with the optimal schedule and
// checks it scores 1.
func finishOptimal(t *testing.T, sess *client.Session, taskID string) {
	t.Helper()
	if err := scoreOptimal(ctxFor(t, 3*time.Minute), sess, taskID); err != nil {
		t.Fatal(err)
	}
}

// scoreOptimal plays the open episode with the optimal schedule; an error
// unless it scores 1.
func scoreOptimal(ctx context.Context, sess *client.Session, taskID string) error {
	if _, err := baseline.Play(ctx, sessionCaller{sess}, baseline.Optimal{}, taskID); err != nil {
		return fmt.Errorf("%s: %w", taskID, err)
	}
	res, err := sess.Step(ctx, "Done.")
	if err != nil {
		return fmt.Errorf("%s: ending the turn: %w", taskID, err)
	}
	if !res.Done || res.Reward == nil || *res.Reward != 1 {
		return fmt.Errorf("%s: optimal schedule: done %v, reward %v, metrics %v; want 1", taskID, res.Done, res.Reward, res.Observation.Metrics)
	}
	return nil
}

// deploy/kubernetes applied with kubectl apply -k as the docs say brings up
// every object and a ready Deployment of the FROM-scratch image; a trainer
// outside the cluster plays GridSim on each replica (at its pod IP, which
// the test cluster routes to the host), each replica's env pods are
// owned by it and labelled with its own server id, the pod's name.
// Killing one replica (delete --grace-period=0 --force) has the garbage
// collector delete its env pods within a minute, no server reaping them
// (the replacement's id is its own name); the other replica's episode goes
// on and scores, and the replacement serves.
func TestK8sInClusterDeploy(t *testing.T) {
	c := k8scluster.RequireCapability(t, k8scluster.CapServices, k8scluster.CapRegistry, k8scluster.CapNetworkPolicy)
	token := inclusterDeploy(t, c, 2)
	servers := serverPods(t, c)
	if len(servers) != 2 {
		t.Fatalf("%d ready server pods, want 2", len(servers))
	}
	ctx := context.Background()
	// The Service selects both.
	eps, err := c.Client.DiscoveryV1().EndpointSlices(inclusterNS).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=agentenv"})
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, sl := range eps.Items {
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				ips = append(ips, ep.Addresses...)
			}
		}
	}
	for _, s := range servers {
		if !slices.Contains(ips, s.Status.PodIP) {
			t.Errorf("the Service's ready endpoints %v lack server pod %s (%s)", ips, s.Name, s.Status.PodIP)
		}
	}

	// One live episode on each replica.
	sessA, taskA := openEpisode(t, podAddr(servers[0].Status.PodIP), token, 0)
	sessB, taskB := openEpisode(t, podAddr(servers[1].Status.PodIP), token, 1)
	_ = sessA
	envs := envPods(t, c)
	if len(envs[""]) != 0 {
		t.Errorf("%d env pods have no owner", len(envs[""]))
	}
	for _, s := range servers {
		own := envs[s.UID]
		if len(own) != 1 {
			t.Fatalf("server pod %s owns %d env pods, want 1 (owners: %v)", s.Name, len(own), ownersOf(envs))
		}
		ref := own[0].OwnerReferences[0]
		if ref.Kind != "Pod" || ref.Name != s.Name {
			t.Errorf("env pod %s: owner %+v, want pod %s", own[0].Name, ref, s.Name)
		}
		if got := own[0].Labels["agentenv.server"]; got != s.Name {
			t.Errorf("env pod %s: server id %q, want the server pod's name %s", own[0].Name, got, s.Name)
		}
	}

	// SIGKILL replica A: no SIGTERM, no teardown by the server.
	killed := servers[0]
	start := time.Now()
	kubectlFor(t, c)("-n", inclusterNS, "delete", "pod", killed.Name, "--grace-period=0", "--force")
	// The bound: a minute, not stretched by AGENTENV_TEST_SCALE.
	wait.For(t, "the killed server's env pods to be collected", func() error {
		if left := envPods(t, c)[killed.UID]; len(left) > 0 {
			return fmt.Errorf("%d left, owners %v", len(left), ownersOf(envPods(t, c)))
		}
		return nil
	}, wait.Timeout(time.Minute))
	if took := time.Since(start); took > time.Minute {
		t.Errorf("the killed server's env pods went %s after the kill, want within a minute", took.Round(100*time.Millisecond))
	}
	t.Logf("the killed server's env pod was collected %s after the kill", time.Since(start).Round(100*time.Millisecond))
	if n := len(envPods(t, c)[servers[1].UID]); n != 1 {
		t.Errorf("the other replica has %d env pods left, want its 1", n)
	}
	finishOptimal(t, sessB, taskB)
	_ = taskA

	// The Deployment replaces the killed pod; the new one serves, and
	// reaped nothing (it is not the killed server: the collector was).
	kubectlFor(t, c)("-n", inclusterNS, "rollout", "status", "deploy/agentenv", "--timeout=5m")
	var fresh *corev1.Pod
	for _, s := range serverPods(t, c) {
		if s.UID != killed.UID && s.UID != servers[1].UID {
			fresh = &s
		}
	}
	if fresh == nil {
		t.Fatal("no replacement server pod is ready")
	}
	sessC, taskC := openEpisode(t, podAddr(fresh.Status.PodIP), token, 2)
	finishOptimal(t, sessC, taskC)

	// Through the Service, as a trainer outside the cluster reaches it
	// without an Ingress: kubectl port-forward.
	fwd := portForward(t, c, "svc/agentenv", 8200)
	sessD, taskD := openEpisode(t, fwd, token, 3)
	finishOptimal(t, sessD, taskD)
	logs, err := c.Client.CoreV1().Pods(inclusterNS).GetLogs(fresh.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(logs), "reaped sandboxes") {
		t.Errorf("the replacement reaped sandboxes: the collector should have:\n%s", logs)
	}
}

// portForward runs kubectl port-forward to target's port on a free local
// port until the test ends, and returns the local address.
func portForward(t *testing.T, c *k8scluster.Cluster, target string, port int) string {
	t.Helper()
	kubectlFor(t, c) // skips without kubectl
	cmd := exec.Command("kubectl", "--kubeconfig", c.Info.Kubeconfig, "-n", inclusterNS, "port-forward", "--address", "127.0.0.1", target, fmt.Sprintf(":%d", port))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// "Forwarding from 127.0.0.1:41234 -> 8200"
	line, err := bufio.NewReader(out).ReadString('\n')
	_, rest, ok := strings.Cut(line, "Forwarding from ")
	addr, _, ok2 := strings.Cut(rest, " ->")
	if err != nil || !ok || !ok2 {
		t.Fatalf("kubectl port-forward %s: %q, %v\n%s", target, line, err, stderr.String())
	}
	return addr
}

// podAddr is a server pod's address: its pod IP, which the test cluster
// routes to the host, and the server's port.
func podAddr(ip string) string { return net.JoinHostPort(ip, "8200") }

func ownersOf(envs map[types.UID][]corev1.Pod) map[types.UID]int {
	out := map[types.UID]int{}
	for k, v := range envs {
		out[k] = len(v)
	}
	return out
}
