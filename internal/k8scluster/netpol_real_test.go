package k8scluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
)

// verdict is how a probe's dial went.
type verdict string

const (
	connected verdict = "connected"
	refused   verdict = "refused" // what a NetworkPolicy's reject gives
	failed    verdict = "failed"  // any other failure (a timeout, no route)
)

// execDial runs `probe dial addr` in pod ns/name (through pods/exec, which
// the kubelet runs outside the pod's network) and reads the verdict from
// its exit status; err is an exec that went wrong, which says nothing
// either way.
func execDial(c *Cluster, ns, name, addr string) (verdict, error) {
	req := c.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "probe", Command: []string{"/probe", "dial", addr}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewWebSocketExecutor(c.Config, "GET", req.URL().String())
	if err != nil {
		return failed, err
	}
	var stdout, stderr bytes.Buffer // one each: the streams are copied concurrently
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	var exit utilexec.ExitError
	switch {
	case err == nil:
		return connected, nil
	case errors.As(err, &exit) && exit.ExitStatus() == 3:
		return refused, nil
	case errors.As(err, &exit) && exit.ExitStatus() == 1:
		return failed, nil
	}
	return failed, fmt.Errorf("exec probe dial %s in %s: %w (it said %q)", addr, name, err, strings.TrimSpace(stdout.String()+stderr.String()))
}

// npPod starts a `probe serve` pod labelled app on node and returns its IP.
func npPod(t *testing.T, c *Cluster, ns, name, app, node string) string {
	t.Helper()
	p := onNode(probePod(name, "serve"), node)
	p.Labels = map[string]string{"app": app}
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return waitPod(t, c, ns, name, 2*time.Minute, "Running with an IP", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
	}).Status.PodIP
}

// policyGuard bounds how long a policy may take to be enforced: the test
// waits for the event (a connection refused, or let through), never sleeps.
const policyGuard = time.Minute

// NetworkPolicy is enforced on both nodes: a default-deny policy blocks pod
// to pod within a node and across nodes, and an allow rule re-opens exactly
// the pair it names (not the other direction, not another pod).
func TestClusterNetworkPolicy(t *testing.T) {
	c := RequireCapability(t, CapNodes, CapNetworkPolicy)
	probe(t, c)
	ns := c.Namespace(t, "k8scluster-netpol")
	ctx := context.Background()
	n1, n2 := c.Info.Nodes[0].Name, c.Info.Nodes[1].Name
	ip := map[string]string{
		"a1": npPod(t, c, ns, "a1", "a", n1), // the client the allow rule names
		"b1": npPod(t, c, ns, "b1", "b", n1), // a server on a1's node
		"b2": npPod(t, c, ns, "b2", "b", n2), // a server on the other node
		"c2": npPod(t, c, ns, "c2", "c", n2), // a client the rule does not name
	}
	addr := func(pod string) string { return net.JoinHostPort(ip[pod], "8080") }
	opens := func(t *testing.T, what, from, to string) {
		t.Helper()
		wait.For(t, what, func() error {
			v, err := execDial(c, ns, from, addr(to))
			if err == nil && v != connected {
				err = fmt.Errorf("not connected (%s)", v)
			}
			return err
		}, wait.Timeout(policyGuard))
	}
	type path struct{ from, to, what string }
	sameNode := path{"a1", "b1", "within a node"}
	crossNode := path{"a1", "b2", "across nodes"}
	back := path{"b2", "a1", "the other direction, across nodes"}
	unnamed := path{"c2", "b2", "from a pod the rule does not name, within a node"}
	unnamedCross := path{"c2", "b1", "from a pod the rule does not name, across nodes"}
	all := []path{sameNode, crossNode, back, unnamed, unnamedCross}
	// With no policy every path is open: what closes later is the policy's doing.
	for _, p := range all {
		opens(t, fmt.Sprintf("%s to reach %s with no policy (%s)", p.from, p.to, p.what), p.from, p.to)
	}
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default-deny"}, Spec: networkingv1.NetworkPolicySpec{
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	t0 := time.Now()
	if _, err := c.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, deny, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	blocked := func(t *testing.T, p path) {
		t.Helper()
		wait.For(t, fmt.Sprintf("default-deny to refuse %s -> %s (%s)", p.from, p.to, p.what), func() error {
			v, err := execDial(c, ns, p.from, addr(p.to))
			if err == nil && v != refused {
				err = fmt.Errorf("not refused (%s)", v)
			}
			return err
		}, wait.Timeout(policyGuard))
	}
	for _, p := range all {
		t.Run("default-deny refuses "+p.what+" "+p.from+"-"+p.to, func(t *testing.T) { blocked(t, p) })
	}
	if t.Failed() {
		t.FailNow() // the allow rule's checks mean nothing without the deny in force
	}
	t.Logf("default-deny enforced on every path %s after create", time.Since(t0).Round(time.Millisecond))
	tcp, port := corev1.ProtocolTCP, intstr.FromInt32(8080)
	allow := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "a-to-b"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "b"}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
		}},
	}}
	t0 = time.Now()
	if _, err := c.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, allow, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []path{sameNode, crossNode} {
		opens(t, fmt.Sprintf("the allow rule to re-open %s -> %s (%s)", p.from, p.to, p.what), p.from, p.to)
	}
	t.Logf("the allow rule enforced %s after create", time.Since(t0).Round(time.Millisecond))
	// Both open paths were re-opened by the same sync: what the rule does
	// not name is still closed now.
	for _, p := range []path{back, unnamed, unnamedCross} {
		t.Run("the allow rule leaves closed "+p.what+" "+p.from+"-"+p.to, func(t *testing.T) {
			switch v, err := execDial(c, ns, p.from, addr(p.to)); {
			case err != nil:
				t.Fatalf("%s -> %s: %v", p.from, p.to, err)
			case v != refused:
				t.Errorf("%s -> %s was not refused though the allow rule names only a -> b (%s)", p.from, p.to, v)
			}
		})
	}
}
