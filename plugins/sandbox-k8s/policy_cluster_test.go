package k8s

// NetworkPolicy, enforced: the policy Deploy creates with each env keeps it
// away from other episodes' envs, the API server and anything outside the
// cluster unless egress allows it, while the server (the host here, in
// server_cidrs) still reaches it. They need a cluster recording
// k8scluster.CapNetworkPolicy (kube-router's policy controller on every
// node); each line is a subtest of its own.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/agentenv/internal/k8scluster"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sdktest/wait"
)

// policyGuard bounds how long the node's policy controller may take to
// apply a new pod's policy: tests wait for the connection to be refused
// (or let through), never sleep.
const policyGuard = time.Minute

// policyEnv deploys a listener env for episode with p and returns it and
// its pod IP.
func policyEnv(t *testing.T, p *Plugin, c *k8scluster.Cluster, ns, episode string) (sandbox.Sandbox, string) {
	t.Helper()
	ctx := context.Background()
	sb, err := p.Deploy(ctx, listenerSpec(map[string]string{sandbox.LabelServer: "srv", sandbox.LabelEpisode: episode}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Terminate(context.Background(), sb) })
	pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, sb.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sb, pod.Status.PodIP
}

// dial runs `listener dial addr` in sb and returns its exit status: 0
// connected, 3 refused (what a NetworkPolicy's reject gives), 1 any other
// failure; err is an exec that went wrong, which says nothing either way.
func dial(p *Plugin, sb sandbox.Sandbox, addr string) (int, error) {
	r, err := p.Exec(context.Background(), sb, []string{"/listener", "dial", addr})
	if err != nil {
		return 0, fmt.Errorf("exec dial %s in %s: %w", addr, sb.ID, err)
	}
	if r.ExitCode != 0 && r.ExitCode != 1 && r.ExitCode != 3 {
		return 0, fmt.Errorf("dial %s in %s: exit %d: %s", addr, sb.ID, r.ExitCode, strings.TrimSpace(r.Stdout+r.Stderr))
	}
	return r.ExitCode, nil
}

// reaches waits until from connects to addr (the path works).
func reaches(t *testing.T, p *Plugin, from sandbox.Sandbox, what, addr string) {
	t.Helper()
	wait.For(t, fmt.Sprintf("%s to reach %s (%s)", from.ID, what, addr), func() error {
		code, err := dial(p, from, addr)
		if err == nil && code != 0 {
			err = fmt.Errorf("dial exited %d", code)
		}
		return err
	}, wait.Timeout(policyGuard))
}

// blocked waits until from's connections to addr are refused by policy;
// with no enforcement they never are and it fails.
func blocked(t *testing.T, p *Plugin, from sandbox.Sandbox, what, addr string) {
	t.Helper()
	wait.For(t, fmt.Sprintf("the NetworkPolicy to refuse %s's connection to %s (%s)", from.ID, what, addr), func() error {
		code, err := dial(p, from, addr)
		if err == nil && code != 3 {
			err = fmt.Errorf("dial exited %d, not 3 (refused)", code)
		}
		return err
	}, wait.Timeout(policyGuard))
}

// get fetches an env's HTTP answer from the host, as agentenv serve does.
func get(url string) (string, error) {
	hc := &http.Client{Timeout: 3 * time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

func TestClusterNetworkPolicyEnforced(t *testing.T) {
	c := k8scluster.RequireCapability(t, k8scluster.CapNetworkPolicy, k8scluster.CapNodes, k8scluster.CapServices)
	listener(t, c)
	ns := c.Namespace(t, "sbk8s-netpol")
	c.PinNodes(t)
	internet := c.HostListener(t) // outside every cluster network
	svc, err := netip.ParsePrefix(c.Info.ServiceCIDR)
	if err != nil {
		t.Fatalf("cluster.json's service_cidr: %v", err)
	}
	n1, n2 := c.Info.Nodes[0].Name, c.Info.Nodes[1].Name
	on := func(node string, extra map[string]any) *Plugin {
		cfg := map[string]any{"node_selector": map[string]string{"kubernetes.io/hostname": node}}
		for k, v := range extra {
			cfg[k] = v
		}
		return configured(t, clusterConfig(t, c.Info.Kubeconfig, ns, cfg))
	}
	p1, p2 := on(n1, nil), on(n2, nil)
	a, aIP := policyEnv(t, p1, c, ns, "ep-a")
	_, bIP := policyEnv(t, p1, c, ns, "ep-b") // another episode, a's node
	_, cIP := policyEnv(t, p2, c, ns, "ep-c") // another episode, the other node
	// An env allowed out to the outside address only.
	pOut := on(n1, map[string]any{"egress_cidrs": []string{c.Info.HostIP + "/32"}})
	out, _ := policyEnv(t, pOut, c, ns, "ep-out")
	// Envs deployed with no policy, one on each node: what they reach
	// shows the paths work, so what a cannot reach is its policy's doing.
	pFree := on(n1, map[string]any{"network_policy": false})
	free, _ := policyEnv(t, pFree, c, ns, "ep-free")
	_, free2IP := policyEnv(t, on(n2, map[string]any{"network_policy": false}), c, ns, "ep-free2")

	port := fmt.Sprint(listenerPort)
	egress := []struct{ what, addr string }{
		{"an env with no policy on the other node", net.JoinHostPort(free2IP, port)},
		{"the API server", strings.TrimPrefix(c.Info.Server, "https://")},
		{"the API server's Service", net.JoinHostPort(svc.Addr().Next().String(), "443")},
		{"an address outside the cluster", internet},
	}
	for _, tg := range egress {
		reaches(t, pFree, free, tg.what, tg.addr)
	}
	// Out of a (egress denied): blocked where the control gets through.
	for _, tg := range egress {
		t.Run("egress denied/"+tg.what, func(t *testing.T) { blocked(t, p1, a, tg.what, tg.addr) })
	}
	// Into another episode's env (ingress from the server only): blocked
	// from a, and from an env with no egress policy of its own.
	for _, tg := range []struct{ what, addr string }{
		{"another episode's env on the same node", net.JoinHostPort(bIP, port)},
		{"another episode's env on the other node", net.JoinHostPort(cIP, port)},
	} {
		t.Run("ingress denied/"+tg.what+"/from an env with a policy", func(t *testing.T) { blocked(t, p1, a, tg.what, tg.addr) })
		t.Run("ingress denied/"+tg.what+"/from an env without one", func(t *testing.T) { blocked(t, pFree, free, tg.what, tg.addr) })
	}
	// egress_cidrs opens exactly what it names.
	t.Run("egress allowed/the outside address egress_cidrs names", func(t *testing.T) { reaches(t, pOut, out, "the allowed address", internet) })
	t.Run("egress allowed/nothing else", func(t *testing.T) {
		blocked(t, pOut, out, "an env with no policy on the other node", net.JoinHostPort(free2IP, port))
	})
	// The server reaches every env through its policy (checked once the
	// policies are shown in force above).
	for _, env := range []struct{ what, ip string }{{"on node1", aIP}, {"on node1, another episode", bIP}, {"on node2", cIP}} {
		t.Run("the server reaches its env "+env.what, func(t *testing.T) {
			url := "http://" + net.JoinHostPort(env.ip, port) + "/"
			if body, err := get(url); err != nil || body == "" {
				t.Errorf("the server cannot reach the env at %s: %q, %v", url, body, err)
			}
		})
	}
}
