package main

// Tests that need the grown test cluster (two nodes: docs/k8s-test-cluster.md).
// On a one-node cluster they skip outside CI and fail under CI=true.

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/agentenv/client"
	"github.com/agentenv/agentenv/examples/gridsim/gridenv"
	"github.com/agentenv/agentenv/internal/k8scluster"
	"github.com/agentenv/agentenv/sdk/sdktest"
	"github.com/agentenv/agentenv/sdk/sdktest/wait"
)

// requireNodes skips (fails under CI=true) unless the cluster has at least
// n Ready nodes.
func requireNodes(t *testing.T, c *k8scluster.Cluster, n int) {
	t.Helper()
	nodes, err := c.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, nd := range nodes.Items {
		for _, cond := range nd.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	if ready < n {
		sdktest.Missing(t, fmt.Sprintf("a test cluster of %d nodes", n), fmt.Sprintf("%d Ready", ready),
			"the grown test cluster (docs/k8s-test-cluster.md)")
	}
}

// deploy/kubernetes on two nodes, as a user runs it: 64 GridSim episodes
// from outside the cluster through the Service (its ClusterIP, which the
// test cluster routes to the host, and kube-proxy sends on to a replica),
// 16 at a time, their env image pulled from the cluster's registry under
// this run's tag (no node had it), NetworkPolicy enforced. Every episode
// scores 1; env pods land on both nodes (the
// sandbox's spread_over) and each is owned by the server pod that made it,
// both replicas having made some.
func TestK8sInClusterTwoNodes(t *testing.T) {
	c := k8scluster.RequireCapability(t, k8scluster.CapNodes, k8scluster.CapServices, k8scluster.CapRegistry, k8scluster.CapNetworkPolicy)
	token := inclusterDeploy(t, c, 2)
	servers := serverPods(t, c)
	if len(servers) != 2 {
		t.Fatalf("%d ready server pods, want 2", len(servers))
	}
	ctx := ctxFor(t, 10*time.Minute)
	svc, err := c.Client.CoreV1().Services(inclusterNS).Get(ctx, "agentenv", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(svc.Spec.ClusterIP, "8200")

	// Every env pod as it is scheduled: its node and owner (they are gone
	// by the end).
	w, err := c.Client.CoreV1().Pods(inclusterNS).Watch(ctx, metav1.ListOptions{LabelSelector: "agentenv.sandbox"})
	if err != nil {
		t.Fatal(err)
	}
	type placed struct{ node, owner, image string }
	var mu sync.Mutex
	seen := map[string]placed{}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.Spec.NodeName == "" {
				continue
			}
			owner := ""
			if len(p.OwnerReferences) > 0 {
				owner = p.OwnerReferences[0].Name
			}
			mu.Lock()
			seen[p.Name] = placed{p.Spec.NodeName, owner, p.Spec.Containers[0].Image}
			mu.Unlock()
		}
	}()

	const episodes, atOnce = 64, 16
	errs := make(chan error, episodes)
	sem := make(chan struct{}, atOnce)
	for i := range episodes {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			sess, task, err := dialReset(ctx, addr, token, i)
			if err == nil {
				err = scoreOptimal(ctx, sess, task)
				sess.Close()
			}
			errs <- err
		}()
	}
	failed := 0
	for range episodes {
		if err := <-errs; err != nil {
			failed++
			t.Error(err)
		}
	}
	w.Stop()
	<-watched
	if failed > 0 {
		t.Fatalf("%d of %d episodes through the Service failed", failed, episodes)
	}
	nodes, owners := map[string]int{}, map[string]int{}
	for name, p := range seen {
		if p.owner == "" {
			t.Errorf("env pod %s has no owner", name)
		}
		if p.image != inclusterEnvImage {
			t.Errorf("env pod %s runs %s, want %s (pushed to the registry this run)", name, p.image, inclusterEnvImage)
		}
		nodes[p.node]++
		owners[p.owner]++
	}
	t.Logf("%d episodes through the Service: env pods by node %v, by server %v", episodes, nodes, owners)
	if len(seen) != episodes {
		t.Errorf("%d env pods seen, want one per episode (%d)", len(seen), episodes)
	}
	if len(nodes) != 2 {
		t.Errorf("env pods on nodes %v, want both", nodes)
	}
	for _, s := range servers {
		if owners[s.Name] == 0 {
			t.Errorf("server pod %s owns none of the env pods (%v): the Service sent it no episode", s.Name, owners)
		}
	}
}

// A node drained mid-run, as kubectl drain does it (cordon, then the
// Eviction API for each pod on it): the episodes whose env pods were on
// it fail at their next step, fast and with a cause that names the
// eviction and the cordoned node (the sandbox's Explain, from the pod's
// last state: it is gone by then), not a call timeout; the others play on
// and score 1; the trainer's replay of each failed day lands on the other
// node and scores 1; SIGTERM leaves no pod nor policy.
func TestServeOnK8sNodeDrained(t *testing.T) {
	k8scluster.RequireCapability(t, k8scluster.CapNodes)
	c, ns := k8sGridsim(t)
	requireNodes(t, c, 2)
	addr := freeAddr(t)
	sv := startServe(t, gridsimBundle, addr, "", nil, "--sandbox", "k8s", "--sandbox-config", k8sConfig(t, c, ns, nil),
		"--reward", "mean")

	// Six live episodes, spread over both nodes (spread_over's default).
	const live = 6
	type episode struct {
		sess *client.Session
		task string
	}
	eps := make([]episode, live)
	for i := range eps {
		eps[i].sess, eps[i].task = openEpisode(t, addr, "", i)
	}
	pods, _ := k8sObjects(t, c, ns)
	if len(pods) != live {
		t.Fatalf("%d env pods for %d live episodes", len(pods), live)
	}
	byNode := map[string][]string{}
	for _, p := range pods {
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p.Name)
	}
	drained := ""
	for node, names := range byNode {
		if drained == "" || len(names) > len(byNode[drained]) {
			drained = node
		}
	}
	if len(byNode) < 2 {
		t.Logf("env pods all on %s (spread is soft): the replays check the other node", drained)
	}
	evicted := byNode[drained]
	t.Logf("env pods by node: %v; draining %s", byNode, drained)

	// kubectl drain, limited to this test's pods: cordon, then evict.
	c.Cordon(t, drained)
	ctx := ctxFor(t, 5*time.Minute)
	for _, name := range evicted {
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		if err := c.Client.PolicyV1().Evictions(ns).Evict(ctx, ev); err != nil {
			t.Fatalf("evicting %s: %v", name, err)
		}
	}
	wait.For(t, fmt.Sprintf("the %d evicted pods on %s to be gone", len(evicted), drained), func() error {
		for _, name := range evicted {
			_, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil {
				return fmt.Errorf("pod %s still there", name)
			}
			if !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
		return nil
	}, wait.Timeout(2*time.Minute))

	// Each episode plays on: those on the drained node fail at their
	// first call, naming why; the rest score 1.
	var failed []int
	for i, ep := range eps {
		_, _, err := sessionCaller{ep.sess}.Call(ctx, gridenv.ToolPrices, map[string]any{})
		if err == nil {
			if err := scoreOptimal(ctx, ep.sess, ep.task); err != nil {
				t.Errorf("day %d, its pod not evicted: %v", i, err)
			}
			continue
		}
		failed = append(failed, i)
		msg := err.Error()
		t.Logf("day %d, its pod evicted from %s: %s", i, drained, msg)
		for _, want := range []string{"got no answer: the env's address is unreachable", "the sandbox says: its pod " + ns + "/", "(node " + drained + ")",
			"evicted", "EvictionByEvictionAPI", "node " + drained + " is cordoned"} {
			if !strings.Contains(msg, want) {
				t.Errorf("day %d's step failed without %q:\n%s", i, want, msg)
			}
		}
		if strings.Contains(msg, "did not answer in time") {
			t.Errorf("day %d failed at a deadline, not at once: %s", i, msg)
		}
	}
	if len(failed) != len(evicted) {
		t.Fatalf("%d episodes failed for %d evicted pods (%v)", len(failed), len(evicted), failed)
	}

	// The trainer's replays: the same days again, their envs on the other
	// node, scored.
	for _, i := range failed {
		sess, task := openEpisode(t, addr, "", i)
		pods, _ := k8sObjects(t, c, ns)
		for _, p := range pods {
			if p.Spec.NodeName == drained {
				t.Errorf("replay of day %d: pod %s placed on the cordoned node %s", i, p.Name, drained)
			}
		}
		finishOptimal(t, sess, task)
	}
	if code := sv.signalAndWait(t, syscall.SIGTERM, time.Minute); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, sv.log)
	}
	waitK8sGone(t, c, ns, time.Minute)
}
