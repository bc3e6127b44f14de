package main

// Tests that need the grown test cluster (two nodes: docs/k8s-test-cluster.md).
// On a one-node cluster they skip outside CI and fail under CI=true.

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/agentenv/internal/k8scluster"
	"github.com/agentenv/agentenv/sdk/sdktest"
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
