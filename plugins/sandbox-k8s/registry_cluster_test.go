package k8s

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/agentenv/agentenv/internal/k8scluster"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// The env image as a user ships it: pushed to the cluster's registry (never
// imported), deployed through the plugin on each node, which pulls it; a
// tag the registry lacks fails the deploy at once, naming the image.
func TestClusterDeployFromRegistry(t *testing.T) {
	c := k8scluster.RequireCapability(t, k8scluster.CapRegistry, k8scluster.CapNodes)
	bin := t.TempDir() + "/listener"
	if err := buildListener(bin); err != nil {
		t.Fatal(err)
	}
	repo := k8scluster.RegistryHost + "/agentenv-k8s-test-listener"
	ref := repo + ":" + rand.String(8)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.PushImage(ctx, bin, ref); err != nil {
		t.Fatal(err)
	}
	ns := c.Namespace(t, "sbk8s-registry")
	c.PinNodes(t)
	for _, n := range c.Info.Nodes {
		p := configured(t, clusterConfig(t, c.Info.Kubeconfig, ns, map[string]any{
			"node_selector": map[string]string{"kubernetes.io/hostname": n.Name}}))
		spec := listenerSpec(nil)
		spec.Image = ref
		sb, err := p.Deploy(ctx, spec)
		if err != nil {
			t.Fatalf("deploy %s on %s: %v", ref, n.Name, err)
		}
		pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, sb.ID, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Spec.NodeName != n.Name || !strings.HasPrefix(pod.Status.ContainerStatuses[0].ImageID, repo+"@sha256:") {
			t.Errorf("pod on %q with imageID %q, want %s running the registry's %s", pod.Spec.NodeName, pod.Status.ContainerStatuses[0].ImageID, n.Name, repo)
		}
		r, err := p.Exec(ctx, sb, []string{"/listener", "echo", "pulled"})
		if err != nil || r.ExitCode != 0 || !strings.Contains(r.Stdout, "pulled") {
			t.Errorf("Exec in the pulled env on %s: %+v, %v", n.Name, r, err)
		}
		if err := p.Terminate(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	p := configured(t, clusterConfig(t, c.Info.Kubeconfig, ns, nil))
	spec := listenerSpec(map[string]string{sandbox.LabelDeploy: "missing"})
	spec.Image = repo + ":never-pushed"
	start := time.Now()
	_, err := p.Deploy(ctx, spec)
	if err == nil || !strings.Contains(err.Error(), "cannot be pulled") || !strings.Contains(err.Error(), spec.Image) {
		t.Errorf("deploy of a tag the registry lacks: %v, want an error saying %s cannot be pulled", err, spec.Image)
	}
	if took := time.Since(start); took > time.Minute {
		t.Errorf("the failed pull took %s: it must not wait for the deadline", took)
	}
	waitClean(t, c, ns, time.Minute)
}
