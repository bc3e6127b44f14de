package main

// agentenv serve --sandbox k8s end to end on the real test cluster of
// internal/k8scluster: GridSim's env a pod per episode, played over the
// WebSocket protocol. Skipped without a cluster outside CI, failed without
// one under CI=true.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/agentenv/agentenv/internal/k8scluster"
	"github.com/agentenv/agentenv/internal/servetest"
)

var (
	gridsimK8sOnce sync.Once
	gridsimK8sErr  error
)

// k8sGridsim is the test cluster with GridSim's env image imported (its
// env server built static, as its Dockerfile's image holds it), and a
// namespace of the test's own.
func k8sGridsim(t *testing.T) (*k8scluster.Cluster, string) {
	t.Helper()
	c := k8scluster.Require(t)
	bin := servetest.Build(t, servetest.GridsimEnv, "")
	gridsimK8sOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		gridsimK8sErr = c.ImportImage(ctx, bin, gridsimImage, "/"+filepath.Base(bin), "--host", "0.0.0.0")
	})
	if gridsimK8sErr != nil {
		t.Fatalf("GridSim's image: %v", gridsimK8sErr)
	}
	return c, c.Namespace(t, "serve-k8s")
}

// k8sConfig writes a sandbox config for namespace ns of the cluster, with
// extra settings (a nil value removes one), and returns its path.
func k8sConfig(t *testing.T, c *k8scluster.Cluster, ns string, extra map[string]any) string {
	t.Helper()
	cfg := map[string]any{
		"kubeconfig": c.Info.Kubeconfig, "namespace": ns,
		// The harness's images name no USER (GridSim's Dockerfile says 65534).
		"run_as_user": 65534,
		// 100 GridSim pods (0.25 CPU, 64 MiB each) on a 2-core node.
		"cpu_request_fraction": 0.02, "memory_request_fraction": 0.25,
		"server_cidrs": []string{c.Info.HostIP + "/32"},
	}
	for k, v := range extra {
		if v == nil { // nil: leave the setting out
			delete(cfg, k)
			continue
		}
		cfg[k] = v
	}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(t.TempDir(), "k8s.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// k8sObjects lists the agentenv pods (not being deleted) and policies in ns.
func k8sObjects(t *testing.T, c *k8scluster.Cluster, ns string) ([]corev1.Pod, []networkingv1.NetworkPolicy) {
	t.Helper()
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: "agentenv.sandbox"}
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	nps, err := c.Client.NetworkingV1().NetworkPolicies(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	return live, nps.Items
}

// waitK8s waits until ok holds of the namespace's agentenv objects (all of
// them, pods being deleted included, for gone), or fails after within.
func waitK8s(t *testing.T, c *k8scluster.Cluster, ns string, within time.Duration, what string, ok func(pods []corev1.Pod, nps []networkingv1.NetworkPolicy) bool) {
	t.Helper()
	wait.For(t, fmt.Sprintf("namespace %s to be %s", ns, what), func() error {
		if pods, nps := k8sObjects(t, c, ns); !ok(pods, nps) {
			return fmt.Errorf("%d pods, %d policies", len(pods), len(nps))
		}
		return nil
	}, wait.Timeout(within), wait.Every(100*time.Millisecond))
}

// waitK8sGone waits until no agentenv pod (being deleted or not) nor
// policy is left in ns.
func waitK8sGone(t *testing.T, c *k8scluster.Cluster, ns string, within time.Duration) {
	t.Helper()
	wait.For(t, fmt.Sprintf("namespace %s to be empty after teardown", ns), func() error {
		pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "agentenv.sandbox"})
		if err != nil {
			t.Fatal(err)
		}
		if _, nps := k8sObjects(t, c, ns); len(pods.Items) > 0 || len(nps) > 0 {
			return fmt.Errorf("%d pods and %d policies left", len(pods.Items), len(nps))
		}
		return nil
	}, wait.Timeout(within), wait.Every(100*time.Millisecond))
}

// GridSim through serve --sandbox k8s: the optimal policy scores 1 and the
// idle one 0.2, each episode's env a pod; SIGTERM removes every pod and
// policy.
func TestServeGridsimOnK8s(t *testing.T) {
	c, ns := k8sGridsim(t)
	for _, warm := range []int{0, 4} {
		t.Run(fmt.Sprintf("warm=%d", warm), func(t *testing.T) {
			addr := freeAddr(t)
			sv := startServe(t, gridsimBundle, addr, "", nil, "--sandbox", "k8s", "--sandbox-config", k8sConfig(t, c, ns, nil),
				"--reward", "mean", "--warm", fmt.Sprint(warm))
			if warm > 0 {
				waitK8s(t, c, ns, 2*time.Minute, "holding the warm pool", func(pods []corev1.Pod, _ []networkingv1.NetworkPolicy) bool {
					n := 0
					for _, p := range pods {
						if p.Status.Phase == corev1.PodRunning {
							n++
						}
					}
					return n == warm
				})
			}
			const days = 4
			errs := make(chan error, days+1)
			var wg sync.WaitGroup
			for i := range days {
				wg.Add(1)
				go func() { defer wg.Done(); errs <- playOptimal(addr, i) }()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := dialServe(t, addr, "")
				final, err := playIdleDay(cl, days)
				if err == nil && final["reward"] != 0.2 {
					err = fmt.Errorf("idle day: reward %v, want 0.2", final["reward"])
				}
				errs <- err
			}()
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			if code := sv.signalAndWait(t, syscall.SIGTERM, time.Minute); code != 0 {
				t.Fatalf("exit %d after SIGTERM:\n%s", code, sv.log)
			}
			waitK8sGone(t, c, ns, time.Minute)
		})
	}
}

// A server killed with SIGKILL leaves 32 env pods running; the next serve
// of the same bundle and address reaps every one of them and their
// policies before serving, and touches nothing else in the namespace.
func TestServeOnK8sSigkillThenRestartReaps(t *testing.T) {
	c, ns := k8sGridsim(t)
	ctx := context.Background()
	// Bystanders: a pod and a policy that are not agentenv's.
	by := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bystander", Labels: map[string]string{"app": "other"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: gridsimImage}},
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptrTo(int64(65534))}}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, by, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bystander"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}}}
	if _, err := c.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	args := []string{"--sandbox", "k8s", "--sandbox-config", k8sConfig(t, c, ns, nil), "--reward", "mean"}
	sv := startServe(t, gridsimBundle, addr, "", nil, args...)
	const live = 32
	var wg sync.WaitGroup
	errs := make(chan error, live)
	for i := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := dialServe(t, addr, "")
			typ, data, err := cl.call(`{"type":"reset","data":{"split":"eval","index":` + fmt.Sprint(i) + `}}`)
			if err == nil && typ != "observation" {
				err = fmt.Errorf("reset %d: %s %v", i, typ, data)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	pods, nps := k8sObjects(t, c, ns)
	if len(pods) != live || len(nps) != live {
		t.Fatalf("%d pods and %d policies for %d live episodes", len(pods), len(nps), live)
	}
	sv.signalAndWait(t, syscall.SIGKILL, 10*time.Second)
	if pods, _ := k8sObjects(t, c, ns); len(pods) != live {
		t.Fatalf("SIGKILL left %d of %d pods: the test proves nothing", len(pods), live)
	}
	again := startServe(t, gridsimBundle, addr, "", nil, args...)
	if pods, _ := k8sObjects(t, c, ns); len(pods) != 0 {
		t.Errorf("%d pods still live after the restart", len(pods))
	}
	waitK8sGone(t, c, ns, time.Minute)
	if !strings.Contains(again.log.String(), "reaped sandboxes an earlier run left behind") {
		t.Errorf("restart did not log the reaping:\n%s", again.log)
	}
	if _, err := c.Client.CoreV1().Pods(ns).Get(ctx, "bystander", metav1.GetOptions{}); err != nil {
		t.Errorf("the bystander pod: %v", err)
	}
	if _, err := c.Client.NetworkingV1().NetworkPolicies(ns).Get(ctx, "bystander", metav1.GetOptions{}); err != nil {
		t.Errorf("the bystander policy: %v", err)
	}
	if code := again.signalAndWait(t, syscall.SIGTERM, time.Minute); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func ptrTo[T any](v T) *T { return &v }

// runServeEnv runs agentenv in the environment startServe gives servers
// (the same user cache, so the same servers' claims).
func runServeEnv(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(agentenv(t), args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// A server killed and never restarted: its pods end at their
// active_deadline on their own; `agentenv sandboxes list` shows them with
// their dead server, and `sandboxes reap` removes them. The deadline (15s)
// runs from the kubelet's admission, so it must outlast a deploy's wait for
// ready on a busy machine, which 5s did not on two nodes.
func TestServeOnK8sPodsEndAtDeadline(t *testing.T) {
	c, ns := k8sGridsim(t)
	addr := freeAddr(t)
	cfg := k8sConfig(t, c, ns, map[string]any{"active_deadline": "15s"})
	sv := startServe(t, gridsimBundle, addr, "", nil, "--sandbox", "k8s", "--reward", "mean", "--sandbox-config", cfg)
	for i := range 3 {
		cl := dialServe(t, addr, "")
		cl.observation(`{"type":"reset","data":{"split":"eval","index":` + fmt.Sprint(i) + `}}`)
	}
	sv.signalAndWait(t, syscall.SIGKILL, 10*time.Second)
	waitK8s(t, c, ns, 2*time.Minute, "ended at their deadline", func(pods []corev1.Pod, _ []networkingv1.NetworkPolicy) bool {
		n := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodFailed && p.Status.Reason == "DeadlineExceeded" {
				n++
			}
		}
		return len(pods) == 3 && n == 3
	})
	out, stderr, code := runServeEnv(t, "sandboxes", "list", "--json", "--sandbox", "k8s", "--sandbox-config", cfg)
	var rows []sandboxRow
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 3 {
		t.Fatalf("sandboxes list: exit %d, %d rows:\n%s%s", code, len(rows), out, stderr)
	}
	for _, r := range rows {
		if r.ServerState != "dead" || !strings.HasPrefix(r.ID, "k8s-") || !strings.HasPrefix(r.Task, "day/eval-") {
			t.Errorf("sandboxes list row %+v: want a k8s pod of a dead server and its task", r)
		}
	}
	out, stderr, code = runServeEnv(t, "sandboxes", "reap", "--sandbox", "k8s", "--sandbox-config", cfg)
	if code != 0 || !strings.Contains(out, "3 sandboxes reaped") {
		t.Fatalf("sandboxes reap: exit %d:\n%s%s", code, out, stderr)
	}
	waitK8sGone(t, c, ns, time.Minute)
}

// 100 episodes at once, each its own pod: all scored; SIGTERM removes
// every pod and policy. The two-node test cluster on 2 cores starts 100
// pods in 1-4 minutes (RunPodSandbox alone took 45 s at the median, 98 s
// at most, at load 65), past the default 2-minute deploy timeout, which
// scored 55-73 of them: the test raises it, as docs/serving.md tells an
// operator of a busy cluster to.
func TestServeOnK8s100AtOnce(t *testing.T) {
	c, ns := k8sGridsim(t)
	addr := freeAddr(t)
	const deployTimeout = 6 * time.Minute
	sv := startServe(t, gridsimBundle, addr, "", nil, "--sandbox", "k8s", "--sandbox-config", k8sConfig(t, c, ns, nil),
		"--max-concurrent-envs", "100", "--deploy-timeout", deployTimeout.String())
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := dialServe(t, addr, "")
			cl.wait = deployTimeout + time.Minute
			final, err := playIdleDay(cl, i)
			if err == nil && final["reward"] != 0.2 {
				err = fmt.Errorf("day %d: reward %v, want 0.2", i, final["reward"])
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			failed++
			t.Error(err)
		}
	}
	t.Logf("%d episodes at once: %d scored in %s", n, n-failed, time.Since(start).Round(time.Millisecond))
	if code := sv.signalAndWait(t, syscall.SIGTERM, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, sv.log)
	}
	waitK8sGone(t, c, ns, 2*time.Minute)
}

// Failures reach the trainer as clear errors naming the pod, never a hang
// until a deadline, and leave nothing behind: an image that does not
// exist, a pod that asks for 1,000 CPUs, a pod deleted mid-episode; and a
// server whose account may not delete pods does not start.
func TestServeOnK8sFailures(t *testing.T) {
	c, ns := k8sGridsim(t)
	for _, tc := range []struct {
		name  string
		extra map[string]any
		want  []string
	}{
		{"missing image", map[string]any{"envs": map[string]any{"gridsim": map[string]any{"image": "agentenv-no-such-image:1"}}},
			[]string{"DEPLOY_FAILED", "cannot be pulled", "agentenv-no-such-image"}},
		{"1000 CPUs", map[string]any{"envs": map[string]any{"gridsim": map[string]any{"cpu": 1000}}, "cpu_request_fraction": 1, "unschedulable_grace": "1s"},
			[]string{"DEPLOY_FAILED", "Insufficient cpu"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := freeAddr(t)
			// --error-detail: the trainer hears the pod and the cause (by
			// default they go to the server's log, the client the env).
			sv := startServe(t, gridsimBundle, addr, "", nil, "--sandbox", "k8s", "--sandbox-config", k8sConfig(t, c, ns, tc.extra), "--error-detail")
			cl := dialServe(t, addr, "")
			start := time.Now()
			typ, data, err := cl.call(`{"type":"reset","data":{"split":"eval","index":0}}`)
			msg := fmt.Sprint(data)
			t.Logf("after %s: %s", time.Since(start).Round(time.Millisecond), msg)
			if err != nil || typ != "error" {
				t.Fatalf("reset: %s %s %v", typ, msg, err)
			}
			for _, want := range append(tc.want, "pod "+ns+"/k8s-") {
				if !strings.Contains(msg, want) {
					t.Errorf("error lacks %q", want)
				}
			}
			waitK8sGone(t, c, ns, time.Minute)
			if code := sv.signalAndWait(t, syscall.SIGTERM, time.Minute); code != 0 {
				t.Fatalf("exit %d", code)
			}
		})
	}
	t.Run("pod deleted mid-episode", func(t *testing.T) {
		addr := freeAddr(t)
		sv := startServe(t, gridsimBundle, addr, "", nil, "--sandbox", "k8s", "--sandbox-config", k8sConfig(t, c, ns, nil))
		cl := dialServe(t, addr, "")
		cl.observation(`{"type":"reset","data":{"split":"eval","index":0}}`)
		pods, _ := k8sObjects(t, c, ns)
		if len(pods) != 1 {
			t.Fatalf("%d pods for one episode", len(pods))
		}
		// As kubectl delete does: the kubelet stops the env, then the pod
		// object goes (a forced delete would drop the object first and
		// leave the container running a while).
		if err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), pods[0].Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitK8sGone(t, c, ns, time.Minute)
		start := time.Now()
		typ, data, err := cl.call(`{"type": "step", "data": {"reply": "` + idleSchedule + `"}}`)
		msg := fmt.Sprint(data)
		t.Logf("after %s: %s %s", time.Since(start).Round(time.Millisecond), typ, msg)
		if err != nil || typ != "error" || !strings.Contains(msg, "EXECUTION_ERROR") || !strings.Contains(msg, pods[0].Name) {
			t.Errorf("step on a deleted pod: %s %s %v; want EXECUTION_ERROR naming pod %s", typ, msg, err, pods[0].Name)
		}
		if code := sv.signalAndWait(t, syscall.SIGTERM, time.Minute); code != 0 {
			t.Fatalf("exit %d", code)
		}
		waitK8sGone(t, c, ns, time.Minute)
	})
	t.Run("RBAC without delete", func(t *testing.T) {
		kc := k8sRoleWithout(t, c, ns, "agentenv-serve-nodelete", "delete")
		cfg := k8sConfig(t, c, ns, map[string]any{"kubeconfig": kc})
		out, stderr, code := runBin(t, agentenv(t), "", "serve", gridsimBundle, "--addr", freeAddr(t), "--sandbox", "k8s", "--sandbox-config", cfg)
		if code != 1 || !strings.Contains(out+stderr, "may not delete pods in namespace "+ns) {
			t.Errorf("serve without delete: exit %d:\n%s%s", code, out, stderr)
		}
	})
}

// k8sRoleWithout applies deploy/kubernetes's Role less the verbs drop in
// ns, binds it to user and returns that user's kubeconfig.
func k8sRoleWithout(t *testing.T, c *k8scluster.Cluster, ns, user string, drop ...string) string {
	t.Helper()
	b, err := os.ReadFile("../../deploy/kubernetes/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	for _, doc := range strings.Split(string(b), "\n---\n") {
		if strings.Contains(doc, "\nkind: Role\n") {
			if err := yaml.UnmarshalStrict([]byte(doc), &role); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(role.Rules) == 0 {
		t.Fatal("deploy/kubernetes/rbac.yaml has no Role")
	}
	role.ObjectMeta = metav1.ObjectMeta{Name: "agentenv-sandbox", Namespace: ns}
	for i := range role.Rules {
		role.Rules[i].Verbs = slices.DeleteFunc(role.Rules[i].Verbs, func(v string) bool { return slices.Contains(drop, v) })
	}
	ctx := context.Background()
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "agentenv-sandbox", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "agentenv-sandbox"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}}}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c.KubeconfigFile(t, user)
}
