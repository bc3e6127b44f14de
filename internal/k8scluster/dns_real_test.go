package k8scluster

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// lookupFrom runs `probe lookup names...` in a pod on node until every name
// resolves (a Service just made reaches CoreDNS's watch in its own time:
// the pod restarts on failure) and returns what each resolved to.
func lookupFrom(t *testing.T, c *Cluster, ns, name, node string, names ...string) map[string]string {
	t.Helper()
	p := onNode(probePod(name, append([]string{"lookup"}, names...)...), node)
	p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p = waitPod(t, c, ns, name, 2*time.Minute, "Succeeded (resolved "+strings.Join(names, " ")+")", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	term := terminated(p)
	if term == nil {
		t.Fatalf("pod %s succeeded with no termination state: %+v", name, p.Status)
	}
	got := map[string]string{}
	for _, line := range strings.Split(term.Message, "\n") {
		n, addrs, _ := strings.Cut(line, " ")
		got[n] = addrs
	}
	return got
}

// Pods on both nodes resolve the kubernetes Service's full name and a test
// Service's short NAME.NS.svc (completed by the search path the kubelet
// writes) to their ClusterIPs through the cluster DNS, and connect to the
// Service by name.
func TestClusterDNS(t *testing.T) {
	c := RequireCapability(t, CapNodes, CapServices, CapDNS)
	probe(t, c)
	ns := c.Namespace(t, "k8scluster-dns")
	ctx := context.Background()
	n1, n2 := c.Info.Nodes[0], c.Info.Nodes[1]
	svc := backendService(t, c, ns, n2.Name, corev1.ServiceTypeClusterIP)
	api, err := c.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	full := "kubernetes.default.svc." + ClusterDomain
	short := "backend." + ns + ".svc"
	want := map[string]string{full: api.Spec.ClusterIP, short: svc.Spec.ClusterIP}
	waitPod(t, c, ns, "backend", 2*time.Minute, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	for i, n := range []NodeInfo{n1, n2} {
		got := lookupFrom(t, c, ns, fmt.Sprintf("lookup-%d", i+1), n.Name, full, short)
		for name, ip := range want {
			if got[name] != ip {
				t.Errorf("from a pod on %s, %s resolved to %q, want the ClusterIP %s", n.Name, name, got[name], ip)
			}
		}
		dialFrom(t, c, ns, fmt.Sprintf("dial-%d", i+1), n.Name, net.JoinHostPort(short, "80"))
	}
	pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, "lookup-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.DNSPolicy != corev1.DNSClusterFirst {
		t.Errorf("the lookup pod's dnsPolicy is %q, want ClusterFirst (the default)", pod.Spec.DNSPolicy)
	}
}

// Up records the DNS capability with the address the kubelets give pods.
func TestClusterDNSInfo(t *testing.T) {
	c := RequireCapability(t, CapDNS)
	if c.Info.DNS == "" || net.ParseIP(c.Info.DNS) == nil {
		t.Fatalf("cluster.json has capability %q but dns %q is not an address", CapDNS, c.Info.DNS)
	}
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", net.JoinHostPort(c.Info.DNS, "53"))
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Over TCP this time (Up checked UDP), and a name outside the
	// cluster's zones fails (SERVFAIL: nothing is forwarded).
	if _, err := r.LookupHost(ctx, "kubernetes.default.svc."+ClusterDomain+"."); err != nil {
		t.Errorf("the cluster DNS at %s over TCP: %v", c.Info.DNS, err)
	}
	if addrs, err := r.LookupHost(ctx, "example.com."); err == nil {
		t.Errorf("example.com resolved to %v through the cluster DNS, which forwards nothing", addrs)
	}
}
