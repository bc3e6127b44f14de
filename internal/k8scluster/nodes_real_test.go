package k8scluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// onNode pins a probe pod to a node (past the scheduler).
func onNode(p *corev1.Pod, node string) *corev1.Pod {
	p.Spec.NodeName = node
	return p
}

// dialFrom runs `probe dial addr` in a pod on node until it connects
// (kube-proxy's rules reach each node in their own time: the pod restarts
// on failure, with the kubelet's backoff) and fails the test if it never
// does within the guard.
func dialFrom(t *testing.T, c *Cluster, ns, name, node, addr string) {
	t.Helper()
	p := onNode(probePod(name, "dial", addr), node)
	p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, name, 2*time.Minute, "Succeeded (connected to "+addr+")", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
}

// backendService starts pod "backend" (probe serve, port 8080) on node and
// a Service "backend" of type typ over it (port 80), and returns the
// Service as created; the pod may not be Running yet.
func backendService(t *testing.T, c *Cluster, ns, node string, typ corev1.ServiceType) *corev1.Service {
	t.Helper()
	ctx := context.Background()
	backend := onNode(probePod("backend", "serve"), node)
	backend.Labels = map[string]string{"app": "backend"}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, backend, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := c.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "backend"},
		Spec: corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": "backend"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// httpOK waits until url answers "ok" from the host; the deadline is a guard
// for kube-proxy's first sync.
func httpOK(t *testing.T, url string) {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second}
	wait.For(t, url+" to answer from the host", func() error {
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok" {
			t.Fatalf("%s answered %q", url, b)
		}
		return nil
	}, wait.Timeout(time.Minute))
}

// Two nodes, each Ready with its own pod range; a pod on one reaches a pod
// on the other, and the host reaches pods on both.
func TestClusterTwoNodes(t *testing.T) {
	c := RequireCapability(t, CapNodes)
	probe(t, c)
	if len(c.Info.Nodes) != NodeCount {
		t.Fatalf("cluster.json records %d nodes, want %d: %+v", len(c.Info.Nodes), NodeCount, c.Info.Nodes)
	}
	ns := c.Namespace(t, "k8scluster-nodes")
	ctx := context.Background()
	ips := map[string]string{}
	for i, n := range c.Info.Nodes {
		name := fmt.Sprintf("serve-%d", i+1)
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, onNode(probePod(name, "serve"), n.Name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := waitPod(t, c, ns, name, 2*time.Minute, "Running with an IP", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
		})
		if !netip.MustParsePrefix(n.PodCIDR).Contains(netip.MustParseAddr(p.Status.PodIP)) {
			t.Errorf("pod on %s has IP %s, outside the node's %s", n.Name, p.Status.PodIP, n.PodCIDR)
		}
		ips[n.Name] = p.Status.PodIP
		httpOK(t, "http://"+net.JoinHostPort(p.Status.PodIP, "8080")+"/")
	}
	n1, n2 := c.Info.Nodes[0].Name, c.Info.Nodes[1].Name
	dialFrom(t, c, ns, "dial-1to2", n1, net.JoinHostPort(ips[n2], "8080"))
	dialFrom(t, c, ns, "dial-2to1", n2, net.JoinHostPort(ips[n1], "8080"))
}

// A Service's ClusterIP answers from the host and from pods on either node
// (the endpoint's own included), and its NodePort on either node's address
// answers from the host.
func TestClusterServices(t *testing.T) {
	c := RequireCapability(t, CapNodes, CapServices)
	probe(t, c)
	ns := c.Namespace(t, "k8scluster-svc")
	n1, n2 := c.Info.Nodes[0], c.Info.Nodes[1]
	svc := backendService(t, c, ns, n2.Name, corev1.ServiceTypeNodePort)
	if !netip.MustParsePrefix(c.Info.ServiceCIDR).Contains(netip.MustParseAddr(svc.Spec.ClusterIP)) {
		t.Errorf("ClusterIP %s outside service_cidr %s", svc.Spec.ClusterIP, c.Info.ServiceCIDR)
	}
	waitPod(t, c, ns, "backend", 2*time.Minute, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	clusterIP := net.JoinHostPort(svc.Spec.ClusterIP, "80")
	httpOK(t, "http://"+clusterIP+"/")
	for _, n := range []NodeInfo{n1, n2} {
		httpOK(t, "http://"+net.JoinHostPort(n.IP, fmt.Sprint(svc.Spec.Ports[0].NodePort))+"/")
	}
	dialFrom(t, c, ns, "from-node1", n1.Name, clusterIP)
	dialFrom(t, c, ns, "from-node2", n2.Name, clusterIP) // the backend's own node
}
