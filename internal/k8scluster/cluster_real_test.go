package k8scluster

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/agentenv/agentenv/internal/servetest"
)

// These tests run against the real cluster (Require): they check what the
// sandbox plugin and its tests rely on the cluster doing.

const probeImage = "agentenv.local/k8scluster-probe:v1"

var probeBuild struct {
	sync.Once
	bin      string
	err      error
	mu       sync.Mutex
	imported map[string]bool // by containerd socket
}

// probe imports testdata/probe's image into c's node (built once per test
// binary, imported once per cluster).
func probe(t *testing.T, c *Cluster) {
	t.Helper()
	probeBuild.Do(func() {
		dir, err := os.MkdirTemp("", "k8scluster-probe-")
		if err != nil {
			probeBuild.err = err
			return
		}
		probeBuild.bin = filepath.Join(dir, "probe")
		probeBuild.err = servetest.BuildStatic(filepath.Join("testdata", "probe"), ".", probeBuild.bin)
	})
	if probeBuild.err != nil {
		t.Fatal(probeBuild.err)
	}
	probeBuild.mu.Lock()
	defer probeBuild.mu.Unlock()
	if probeBuild.imported[c.Info.ContainerdSocket] {
		return
	}
	c.Image(t, probeBuild.bin, probeImage)
	if probeBuild.imported == nil {
		probeBuild.imported = map[string]bool{}
	}
	probeBuild.imported[c.Info.ContainerdSocket] = true
}

func probePod(name string, args ...string) *corev1.Pod {
	zero, no := int64(0), false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &zero,
			AutomountServiceAccountToken:  &no,
			Containers: []corev1.Container{{
				Name: "probe", Image: probeImage, ImagePullPolicy: corev1.PullNever, Args: args,
			}},
		},
	}
}

// waitPod watches pod ns/name until done says it is what the test waits
// for, and returns it; the deadline is only a guard.
func waitPod(t *testing.T, c *Cluster, ns, name string, timeout time.Duration, what string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatalf("watch pod %s: %v", name, err)
	}
	defer w.Stop()
	var last *corev1.Pod
	if p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		if done(p) {
			return p
		}
		last = p
	}
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("pod %s: watch closed before %s", name, what)
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod || ev.Type == watch.Deleted {
				continue
			}
			last = p
			if done(p) {
				return p
			}
		case <-ctx.Done():
			t.Fatalf("pod %s: not %s after %s; last status: %+v", name, what, timeout, last.Status)
		}
	}
}

func terminated(p *corev1.Pod) *corev1.ContainerStateTerminated {
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Terminated != nil {
			return s.State.Terminated
		}
	}
	return nil
}

// A pod answers on its pod IP from the host's network namespace: create →
// Running → first HTTP answer, the path every sandbox deploy takes.
func TestClusterPodAnswersFromHost(t *testing.T) {
	c := Require(t)
	probe(t, c)
	ns := c.Namespace(t, "k8scluster-answer")
	var took []time.Duration
	for i := 0; i < 5; i++ {
		name := fmt.Sprintf("answer-%d", i)
		t0 := time.Now()
		if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), probePod(name, "serve"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := waitPod(t, c, ns, name, 2*time.Minute, "Running with an IP", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
		})
		url := "http://" + net.JoinHostPort(p.Status.PodIP, "8080") + "/"
		hc := &http.Client{Timeout: 2 * time.Second}
		deadline := time.Now().Add(time.Minute)
		for {
			resp, err := hc.Get(url)
			if err == nil {
				var b bytes.Buffer
				b.ReadFrom(resp.Body)
				resp.Body.Close()
				if b.String() != "ok" {
					t.Fatalf("%s answered %q", url, b.String())
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod %s at %s never answered from the host: %v", name, url, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		took = append(took, time.Since(t0))
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("create → Running → HTTP answer from the host: p50 %s, max %s (of %d)", took[len(took)/2], took[len(took)-1], len(took))
}

// A container over its memory limit is OOMKilled by the cgroup, and the
// pod says so.
func TestClusterOOMKilled(t *testing.T) {
	c := Require(t)
	probe(t, c)
	ns := c.Namespace(t, "k8scluster-oom")
	pod := probePod("oom", "alloc", "256")
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, c, ns, "oom", 2*time.Minute, "terminated", func(p *corev1.Pod) bool { return terminated(p) != nil })
	if r := terminated(p).Reason; r != "OOMKilled" {
		t.Fatalf("terminated with reason %q (exit %d), want OOMKilled", r, terminated(p).ExitCode)
	}
}

// A pod asking for more CPUs than the node has stays Pending, and the
// scheduler says why: insufficient cpu.
func TestClusterUnschedulable(t *testing.T) {
	c := Require(t)
	ns := c.Namespace(t, "k8scluster-unsched")
	pod := probePod("huge", "sleep")
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000")},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, c, ns, "huge", time.Minute, "marked unschedulable", func(p *corev1.Pod) bool {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				return true
			}
		}
		return false
	})
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && !strings.Contains(cond.Message, "Insufficient cpu") {
			t.Errorf("unschedulable message %q does not name cpu", cond.Message)
		}
	}
}

// An image the node does not have and cannot pull (offline) fails fast
// with ErrImagePull / ImagePullBackOff, not a silent Pending.
func TestClusterMissingImage(t *testing.T) {
	c := Require(t)
	ns := c.Namespace(t, "k8scluster-noimage")
	pod := probePod("noimage", "sleep")
	pod.Spec.Containers[0].Image = "agentenv.local/does-not-exist:v1"
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	t0 := time.Now()
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, c, ns, "noimage", 2*time.Minute, "failing to pull", func(p *corev1.Pod) bool {
		for _, s := range p.Status.ContainerStatuses {
			if w := s.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
				return true
			}
		}
		return false
	})
	t.Logf("%s after %s: %s", p.Status.ContainerStatuses[0].State.Waiting.Reason, time.Since(t0).Round(time.Millisecond), p.Status.ContainerStatuses[0].State.Waiting.Message)
}

// pods/exec works from the host: the apiserver streams from the kubelet.
func TestClusterExec(t *testing.T) {
	c := Require(t)
	probe(t, c)
	ns := c.Namespace(t, "k8scluster-exec")
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), probePod("exec", "sleep"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "exec", 2*time.Minute, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	req := c.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name("exec").SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "probe", Command: []string{"/probe", "echo", "hello", "from", "exec"}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewWebSocketExecutor(c.Config, "GET", req.URL().String())
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		t.Fatalf("exec: %v (stderr %q)", err, stderr.String())
	}
	if got := strings.TrimSpace(stdout.String()); got != "hello from exec" {
		t.Fatalf("exec printed %q, stderr %q", got, stderr.String())
	}
}

// activeDeadlineSeconds ends a pod that would run forever: the lease that
// outlives a dead server.
func TestClusterActiveDeadline(t *testing.T) {
	c := Require(t)
	probe(t, c)
	ns := c.Namespace(t, "k8scluster-deadline")
	pod := probePod("deadline", "sleep")
	d := int64(3)
	pod.Spec.ActiveDeadlineSeconds = &d
	t0 := time.Now()
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, c, ns, "deadline", 2*time.Minute, "failed at its deadline", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if p.Status.Reason != "DeadlineExceeded" {
		t.Errorf("pod failed with reason %q, want DeadlineExceeded", p.Status.Reason)
	}
	t.Logf("ended %s after create (deadline %ds)", time.Since(t0).Round(time.Millisecond), d)
}

// Pod traffic never leaves the machine: the cluster's namespace has no
// route beyond its link, so a pod dialing an outside address (the host's
// own gateway here) fails at once, while the host's end of the link is
// reachable (the route back to pods works).
func TestClusterPodsStayOnMachine(t *testing.T) {
	c := Require(t)
	probe(t, c)
	ns := c.Namespace(t, "k8scluster-egress")
	out, err := exec.Command("ip", "-4", "route", "show", "default").Output()
	if err != nil || len(strings.Fields(string(out))) < 3 {
		t.Skipf("no default route on the host to dial: %s %v", out, err)
	}
	gw := strings.Fields(string(out))[2]
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), probePod("egress", "dial", net.JoinHostPort(gw, "53")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, c, ns, "egress", 2*time.Minute, "terminated", func(p *corev1.Pod) bool { return terminated(p) != nil })
	if tm := terminated(p); tm.ExitCode == 0 || !strings.Contains(tm.Message, "unreachable") && !strings.Contains(tm.Message, "no route") {
		t.Fatalf("a pod dialing %s outside the machine: exit %d, %q; want unreachable", gw, tm.ExitCode, tm.Message)
	}
	// The host side of the link answers (a listener of the test's, on it).
	host := c.HostListener(t)
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), probePod("tohost", "dial", host), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p = waitPod(t, c, ns, "tohost", 2*time.Minute, "terminated", func(p *corev1.Pod) bool { return terminated(p) != nil })
	if tm := terminated(p); tm.ExitCode != 0 {
		t.Fatalf("a pod dialing the host's end of the link %s: exit %d, %q", host, tm.ExitCode, tm.Message)
	}
}

// KubeconfigFor's user is authenticated by the cluster and has only the
// rights a RoleBinding gives it: what the plugin's RBAC error test needs.
func TestClusterKubeconfigForRBAC(t *testing.T) {
	c := Require(t)
	ctx := context.Background()
	ns := c.Namespace(t, "k8scluster-rbac")
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "no-delete"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create"}}},
	}
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "no-delete"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "no-delete"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "agentenv:testers"}},
	}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.KubeconfigFile(t, "tester", "agentenv:testers"))
	if err != nil {
		t.Fatal(err)
	}
	user, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// RBAC caches bindings for a moment: the first list may still be denied.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err = user.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the bound user cannot list pods: %v", err)
	}
	err = user.CoreV1().Pods(ns).Delete(ctx, "any", metav1.DeleteOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "tester" cannot delete resource "pods"`) {
		t.Fatalf("delete without the verb: %v; want Forbidden naming the user, verb and resource", err)
	}
	if _, err := user.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing outside the bound namespace: %v; want Forbidden", err)
	}
}
