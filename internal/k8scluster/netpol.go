package k8scluster

// NetworkPolicy enforcement: kube-router's network policy controller
// (firewall mode only: no routing, no service proxy), one per node, in the
// node's network namespace, judging pod traffic with Debian's iptables and
// ipset. It is built from the Go module proxy through the wrapper module in
// netpolbuild/ and cached beside the Kubernetes binaries.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeRouterVersion is the kube-router release the harness builds: the
// newest the Go module proxy serves (netpolbuild/go.mod pins it; a test
// checks they agree).
const KubeRouterVersion = "v2.1.0"

// CapNetworkPolicy: NetworkPolicy objects are enforced (kube-router's
// policy controller on every node).
const CapNetworkPolicy = "network-policy"

// EnvNetworkPolicy=off brings a cluster up without the policy controller
// (policies accepted, not enforced): how the policy tests are shown to
// fail without enforcement.
const EnvNetworkPolicy = "AGENTENV_K8S_NETWORK_POLICY"

const kubeRouter = "kube-router"

// kubeRouterUser is the controller's Kubernetes user, bound to
// kubeRouterRole.
const kubeRouterUser = "system:kube-router"

// KubeRouterBin is the cached kube-router binary:
// <cache>/kube-router/<version>/kube-router.
func KubeRouterBin() string {
	return filepath.Join(CacheDir(), kubeRouter, KubeRouterVersion, kubeRouter)
}

// networkPolicyOn reads EnvNetworkPolicy: on unless "off".
func networkPolicyOn() (bool, error) {
	switch v := os.Getenv(EnvNetworkPolicy); v {
	case "", "on":
		return true, nil
	case "off":
		return false, nil
	default:
		return false, fmt.Errorf("%s=%q: want on or off", EnvNetworkPolicy, v)
	}
}

// checkKubeRouter reports whether bin is kube-router KubeRouterVersion.
func checkKubeRouter(bin string) error { return kubeRouterAddon.check(bin) }

// kubeRouterAddon is kube-router of KubeRouterVersion.
var kubeRouterAddon = addon{name: kubeRouter, version: KubeRouterVersion, versionFlag: "--version",
	reports: "version " + KubeRouterVersion + ",", cold: "a few minutes"}

// preflightNetPol checks what the policy controller needs: its binary and
// Debian's ipset (iptables is checked with the other tools).
func preflightNetPol() error {
	on, err := networkPolicyOn()
	if err != nil || !on {
		return err
	}
	if _, err := exec.LookPath("ipset"); err != nil {
		return errors.New("missing ipset (kube-router's policy controller keeps pod sets in it): apt-get install ipset")
	}
	if err := checkKubeRouter(KubeRouterBin()); err != nil {
		return fmt.Errorf("%w: build it with `make k8s-up` or `k8scluster build`", err)
	}
	return nil
}

// BuildKubeRouter builds kube-router KubeRouterVersion from the Go module
// proxy through the wrapper module in srcDir (internal/k8scluster/
// netpolbuild) into KubeRouterBin, unless it is there: built into a
// temporary file beside it, checked, then renamed.
func BuildKubeRouter(ctx context.Context, srcDir string, log hclog.Logger) error {
	if _, err := os.Stat(filepath.Join(srcDir, "go.mod")); err != nil {
		return fmt.Errorf("the kube-router wrapper module: %w", err)
	}
	ld := "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=" + KubeRouterVersion +
		" -X github.com/cloudnativelabs/kube-router/v2/pkg/version.BuildDate=2026-01-01T00:00:00Z"
	return kubeRouterAddon.build(ctx, KubeRouterBin(), func(_, out string) *exec.Cmd {
		return wrapperBuild(ctx, srcDir, ld, "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router", out)
	}, log)
}

// startNetPol gives kube-router a user with the read access its informers
// need, starts one per node in the node's network namespace under the
// node's name, and waits until each has installed its chains. It returns
// whether policies are enforced (EnvNetworkPolicy=off: not started).
func (u *upRun) startNetPol(ctx context.Context, cl *Cluster, ca *CA) (bool, error) {
	if on, err := networkPolicyOn(); err != nil || !on {
		if err == nil {
			u.log.Warn("NetworkPolicy not enforced: kube-router not started", EnvNetworkPolicy, "off")
		}
		return false, err
	}
	cred, err := ca.ClientCert(kubeRouterUser)
	if err != nil {
		return false, err
	}
	kc := u.c.path("pki", kubeRouter+".kubeconfig")
	b, err := kubeconfig(u.c.Name, u.c.APIServerURL(), ca.PEM, kubeRouterUser, cred)
	if err != nil {
		return false, err
	}
	if err := writeFile(kc, b, 0o600); err != nil {
		return false, err
	}
	if err := bindKubeRouter(ctx, cl); err != nil {
		return false, err
	}
	for _, n := range u.c.nodes() {
		if err := u.startAttr(n.comp(kubeRouter), n.NetNSPath(), nil, nil, KubeRouterBin(),
			"--kubeconfig="+kc, "--hostname-override="+n.Name(),
			"--run-firewall=true", "--run-router=false", "--run-service-proxy=false",
			"--service-cluster-ip-range="+u.c.ServiceCIDR().String(), "--service-node-port-range=30000-32767",
			"--metrics-port=0", "--v=1"); err != nil {
			return false, err
		}
	}
	for _, n := range u.c.nodes() {
		if err := u.poll(ctx, n.comp(kubeRouter), 2*time.Minute, 200*time.Millisecond, func() (bool, error) {
			return n.netpolChains(ctx)
		}); err != nil {
			return false, err
		}
	}
	u.step("kube-router's policy chains in both nodes")
	return true, nil
}

// bindKubeRouter lets kubeRouterUser read what kube-router's informers
// watch (it starts them all, even for controllers it does not run).
func bindKubeRouter(ctx context.Context, cl *Cluster) error {
	read := []string{"get", "list", "watch"}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: kubeRouter}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "namespaces", "nodes", "services", "endpoints"}, Verbs: read},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: read},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
	}}
	bind := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: kubeRouter},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: kubeRouter},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: kubeRouterUser}}}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := cl.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kube-router's ClusterRole: %w", err)
	}
	if _, err := cl.Client.RbacV1().ClusterRoleBindings().Create(ctx, bind, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kube-router's ClusterRoleBinding: %w", err)
	}
	return nil
}

// netpolChains reports whether kube-router's first sync is done in the
// node: its forward chain exists and FORWARD jumps to it.
func (n node) netpolChains(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nsenter", "--net="+n.NetNSPath(), "--", "iptables", "-w", "5", "-S", "FORWARD").CombinedOutput()
	if err != nil {
		return false, fmt.Errorf("iptables -S FORWARD in %s: %w: %s", n.Name(), err, out)
	}
	if !strings.Contains(string(out), "-j KUBE-ROUTER-FORWARD") {
		return false, fmt.Errorf("no KUBE-ROUTER-FORWARD jump in %s's FORWARD chain yet", n.Name())
	}
	return true, nil
}
