package k8s

// Request building and status handling against client-go's fake
// clientset: what the plugin asks of the API server, in which order, and
// what it makes of the answers. The real cluster tests (cluster_test.go)
// show the same against a real API server, scheduler and kubelet.

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

// fakeKubelet answers each pod watch the plugin opens by sending the pod
// with the status status(pod) gives it: a kubelet whose every pod reaches
// that state at once.
type fakeKubelet struct {
	cs     *fake.Clientset
	status func(*corev1.Pod) corev1.PodStatus
}

func newFake(t *testing.T, cfg Config, status func(*corev1.Pod) corev1.PodStatus) (*Plugin, *fake.Clientset) {
	t.Helper()
	cs := fake.NewClientset()
	k := &fakeKubelet{cs: cs, status: status}
	cs.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
		name := strings.TrimPrefix(a.(k8stesting.WatchActionImpl).WatchRestrictions.Fields.String(), "metadata.name=")
		w := watch.NewRaceFreeFake()
		obj, err := cs.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, a.GetNamespace(), name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod).DeepCopy()
		// Another pod's event first: the plugin must ignore it.
		other := pod.DeepCopy()
		other.Name = "someone-else"
		other.Status.Phase = corev1.PodFailed
		w.Modify(other)
		pod.Status = k.status(pod)
		w.Modify(pod)
		return true, w, nil
	})
	uids := 0
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		uids++ // the API server gives every object a UID; the fake does not
		a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).UID = types.UID("uid-" + strconv.Itoa(uids))
		return false, nil, nil
	})
	p := New()
	p.SetLogger(hclog.NewNullLogger())
	if err := p.Use(cfg, cs, nil, "envs"); err != nil {
		t.Fatal(err)
	}
	return p, cs
}

// loopback listens on a free loopback port: the "pod IP" of fake pods.
func loopback(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func running(*corev1.Pod) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1"}
}

func fakeLabels(episode string) map[string]string {
	return map[string]string{sandbox.LabelServer: "srv1", sandbox.LabelEpisode: episode, sandbox.LabelTask: "day/eval-001",
		sandbox.LabelDeploy: "d-" + episode, sandbox.LabelCreated: "2026-12-02T02:00:00Z"}
}

// verbs are the API calls the fake saw, as "verb resource[/sub]".
func verbs(cs *fake.Clientset) []string {
	var out []string
	for _, a := range cs.Actions() {
		r := a.GetResource().Resource
		if a.GetSubresource() != "" {
			r += "/" + a.GetSubresource()
		}
		out = append(out, a.GetVerb()+" "+r)
	}
	return out
}

func TestFakeLifecycle(t *testing.T) {
	port := loopback(t)
	p, cs := newFake(t, DefaultConfig(), running)
	ctx := context.Background()
	spec := sandbox.Spec{Env: "web", Image: "web:1", Port: port, EnvVars: map[string]string{"TOKEN": "s3cret"}, Labels: fakeLabels("ep1")}
	sb, err := p.Deploy(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Endpoint != "http://127.0.0.1:"+strconv.Itoa(port) || !strings.HasPrefix(sb.ID, "k8s-") || sb.Labels[sandbox.LabelTask] != "day/eval-001" {
		t.Fatalf("handle %+v", sb)
	}
	if strings.Contains(string(sb.State), "s3cret") {
		t.Fatal("the handle holds a variable's value")
	}
	want := []string{"create pods", "create networkpolicies", "create secrets", "patch pods", "watch pods"}
	got := verbs(cs)
	// The policy and the Secret are created at once: either order.
	if len(got) != 5 || got[0] != want[0] || got[3] != want[3] || got[4] != want[4] ||
		!(got[1] == want[1] && got[2] == want[2] || got[1] == want[2] && got[2] == want[1]) {
		t.Fatalf("calls %q, want %q", got, want)
	}
	pod, err := cs.CoreV1().Pods("envs").Get(ctx, sb.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.SchedulingGates) != 0 {
		t.Errorf("the gate is still on: %+v", pod.Spec.SchedulingGates)
	}
	np, err := cs.NetworkingV1().NetworkPolicies("envs").Get(ctx, sb.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec, err := cs.CoreV1().Secrets("envs").Get(ctx, sb.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, meta := range []metav1.ObjectMeta{np.ObjectMeta, sec.ObjectMeta} {
		if len(meta.OwnerReferences) != 1 || meta.OwnerReferences[0].Name != pod.Name || meta.OwnerReferences[0].UID != pod.UID {
			t.Errorf("%s is not owned by its pod: %+v", meta.Name, meta.OwnerReferences)
		}
	}
	for _, tc := range []struct {
		want map[string]string
		n    int
	}{
		{map[string]string{sandbox.LabelServer: "srv1"}, 1},
		{map[string]string{sandbox.LabelTask: "day/eval-001"}, 1},
		{map[string]string{sandbox.LabelTask: "day/eval-002"}, 0},
		{map[string]string{"no such key": "x"}, 0},
		{nil, 1},
	} {
		got, err := p.List(ctx, tc.want)
		if err != nil || len(got) != tc.n || tc.n == 1 && (got[0].ID != sb.ID || string(got[0].State) != string(sb.State)) {
			t.Errorf("List(%v) = %+v, %v; want %d", tc.want, got, err, tc.n)
		}
	}
	cs.ClearActions()
	if err := p.Terminate(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if got := verbs(cs); len(got) != 2 || got[0] != "get pods" || got[1] != "delete pods" {
		t.Errorf("Terminate's calls %q", got)
	}
	del := cs.Actions()[1].(k8stesting.DeleteActionImpl).DeleteOptions
	if del.Preconditions == nil || pod.UID == "" || *del.Preconditions.UID != pod.UID || del.GracePeriodSeconds != nil {
		t.Errorf("delete options %+v: want the pod's UID as precondition, and its own grace period (termination_grace)", del)
	}
	if err := p.Terminate(ctx, sb); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("second Terminate: %v", err)
	}
}

// Each status that will not get better fails the deploy at once, naming
// the pod, and leaves no pod behind.
func TestFakeDeployFailures(t *testing.T) {
	unsched := func(*corev1.Pod) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available: 1 Insufficient cpu."}}}
	}
	pull := func(*corev1.Pod) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "env", Image: "nope:1",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "nope:1: not found"}}}}}
	}
	cfg := DefaultConfig()
	cfg.UnschedulableGrace = 0
	for _, tc := range []struct {
		name   string
		status func(*corev1.Pod) corev1.PodStatus
		want   string
	}{
		{"unschedulable", unsched, "Insufficient cpu"},
		{"image", pull, "cannot be pulled: ErrImagePull"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, cs := newFake(t, cfg, tc.status)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := p.Deploy(ctx, sandbox.Spec{Env: "web", Image: "nope:1", Port: 80, Labels: fakeLabels("ep")})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "pod envs/k8s-") {
				t.Fatalf("Deploy: %v; want an error naming the pod and %q", err, tc.want)
			}
			if ctx.Err() != nil {
				t.Fatal("Deploy waited for its deadline")
			}
			if pods, _ := cs.CoreV1().Pods("envs").List(ctx, metav1.ListOptions{}); len(pods.Items) != 0 {
				t.Fatalf("left %d pods", len(pods.Items))
			}
		})
	}
}

// A forbidden call names the verb and resource to grant.
func TestFakeForbidden(t *testing.T) {
	p, cs := newFake(t, DefaultConfig(), running)
	cs.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", errors.New("RBAC: no"))
	})
	_, err := p.Deploy(context.Background(), sandbox.Spec{Env: "web", Image: "web:1", Port: 80, EnvVars: map[string]string{"A": "b"}, Labels: fakeLabels("ep")})
	if err == nil || !strings.Contains(err.Error(), `add verb "create" on "secrets"`) {
		t.Fatalf("Deploy: %v", err)
	}
	if pods, _ := cs.CoreV1().Pods("envs").List(context.Background(), metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Fatalf("left %d pods", len(pods.Items))
	}
}

// Many deploys at once each get their own pod and handle.
func TestFakeConcurrent(t *testing.T) {
	port := loopback(t)
	p, cs := newFake(t, DefaultConfig(), running)
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = p.Deploy(context.Background(), sandbox.Spec{Env: "web", Image: "web:1", Port: port, Labels: fakeLabels("ep" + strconv.Itoa(i))})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if pods, _ := cs.CoreV1().Pods("envs").List(context.Background(), metav1.ListOptions{}); len(pods.Items) != 20 {
		t.Fatalf("%d pods for 20 deploys", len(pods.Items))
	}
}

// An env that asks for no internet, with network_policy off: the deploy
// goes on (as where the CNI does not enforce policies), and the plugin says
// once per env that nothing keeps it offline.
func TestFakeNoInternetWithoutPolicyWarnsOnce(t *testing.T) {
	port := loopback(t)
	cfg := DefaultConfig()
	cfg.NetworkPolicy = false
	cfg.TerminalImage = "terminal:1"
	p, _ := newFake(t, cfg, running)
	var logged strings.Builder
	var mu sync.Mutex
	p.SetLogger(hclog.New(&hclog.LoggerOptions{Output: writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logged.Write(b)
	}), Level: hclog.Warn}))
	ctx := context.Background()
	for i, env := range []string{"offline", "offline", "other"} {
		spec := sandbox.Spec{Env: env, Image: "task:1", Port: port, NoInternet: true, Terminal: &sandbox.Terminal{}, Labels: fakeLabels("ep" + strconv.Itoa(i))}
		sb, err := p.Deploy(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Terminate(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logged.String(), "network_policy is off"); n != 2 || !strings.Contains(logged.String(), "env=offline") || !strings.Contains(logged.String(), "env=other") {
		t.Errorf("%d warnings, want one per env:\n%s", n, logged.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// In a pod of the env namespace (the downward API variables set), every env
// pod is owned by the server's pod; outside one, by nothing.
func TestFakeOwnedByServerPod(t *testing.T) {
	for _, tc := range []struct {
		name  string
		podNS string
		owned bool
	}{{"server in the env namespace", "envs", true}, {"server in another namespace", "agentenv", false}, {"no server pod", "", false}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.podNS != "" {
				t.Setenv(EnvPodName, "agentenv-5f7c-x2")
				t.Setenv(EnvPodNamespace, tc.podNS)
				t.Setenv(EnvPodUID, "server-uid")
			}
			p, cs := newFake(t, DefaultConfig(), running)
			ctx := context.Background()
			sb, err := p.Deploy(ctx, sandbox.Spec{Env: "web", Image: "web:1", Port: loopback(t), Labels: fakeLabels("ep1")})
			if err != nil {
				t.Fatal(err)
			}
			pod, err := cs.CoreV1().Pods("envs").Get(ctx, sb.ID, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			refs := pod.OwnerReferences
			if !tc.owned {
				if len(refs) != 0 {
					t.Fatalf("owners %+v, want none", refs)
				}
				return
			}
			if len(refs) != 1 || refs[0].Kind != "Pod" || refs[0].Name != "agentenv-5f7c-x2" || refs[0].UID != "server-uid" {
				t.Fatalf("owners %+v, want the server's pod", refs)
			}
		})
	}
}
