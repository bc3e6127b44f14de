package k8scluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
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

// The cluster's DNS: CoreDNS, built from the Go module proxy through the
// wrapper module in dnsbuild/ (only the plugins its Corefile uses), run as
// a process in the control plane's network namespace on its address, like
// the apiserver: pods on both nodes reach it there, it keeps answering
// while a node is drained or its kubelet killed, and Up needs no image
// imported nor pod scheduled for it. The kubelets give pods that address
// as their nameserver (clusterDNS) and cluster.local as their domain.
const (
	// CoreDNSVersion is the CoreDNS release dnsbuild/go.mod pins.
	CoreDNSVersion = "v1.15.0"
	// ClusterDomain is the cluster's DNS domain (the kubelets' clusterDomain).
	ClusterDomain = "cluster.local"
	// CapDNS: pods resolve Service names (NAME.NS.svc.cluster.local and
	// the short forms their search path completes) through the cluster's
	// DNS at Info.DNS.
	CapDNS = "dns"
	// dnsUser is CoreDNS's identity to the apiserver.
	dnsUser = "system:agentenv:coredns"
	// dnsReadyPort is CoreDNS's ready plugin's port on the control
	// plane's address (200 once the kubernetes plugin has synced).
	dnsReadyPort = "8181"
)

// CoreDNSBinary is where the CoreDNS of CoreDNSVersion is cached:
// ${AGENTENV_K8S_CACHE:-$HOME/.cache/agentenv-k8s}/coredns-<version>/bin/coredns.
func CoreDNSBinary() string {
	return filepath.Join(CacheDir(), "coredns-"+CoreDNSVersion, "bin", "coredns")
}

// DNSAddr is the cluster DNS's address (port 53): the control plane's.
func (c Config) DNSAddr() netip.Addr { return c.NodeIP() }

// coreDNS is CoreDNS of CoreDNSVersion, built with only the plugins used.
var coreDNS = addon{name: "CoreDNS", version: CoreDNSVersion, versionFlag: "-version",
	reports: "CoreDNS-" + strings.TrimPrefix(CoreDNSVersion, "v") + "\n", cold: "~5 CPU-minutes"}

// CheckCoreDNS reports whether bin is the CoreDNS of CoreDNSVersion.
func CheckCoreDNS(bin string) error { return coreDNS.check(bin) }

// BuildCoreDNS builds srcDir's CoreDNS (internal/k8scluster/dnsbuild) into
// a temporary file beside bin and renames it in, unless bin already is it.
func BuildCoreDNS(ctx context.Context, srcDir, bin string, log hclog.Logger) error {
	if _, err := os.Stat(filepath.Join(srcDir, "go.mod")); err != nil {
		return fmt.Errorf("CoreDNS's wrapper module: %w", err)
	}
	return coreDNS.build(ctx, bin, func(_, out string) *exec.Cmd {
		return wrapperBuild(ctx, srcDir, "-s -w", ".", out)
	}, log)
}

// corefile serves cluster.local and the reverse zones from the apiserver,
// on the control plane's address only. Nothing is forwarded: nothing
// outside the cluster is reachable from it, and a name outside the zones
// fails at once (SERVFAIL) rather than timing out against a dead upstream.
// loop stays for the day a forward is added.
func (c Config) corefile() string {
	return strings.NewReplacer(
		"@ADDR@", c.DNSAddr().String(),
		"@READY@", net.JoinHostPort(c.DNSAddr().String(), dnsReadyPort),
		"@DOMAIN@", ClusterDomain,
		"@KUBECONFIG@", c.path("pki", "coredns.kubeconfig"),
	).Replace(`.:53 {
    bind @ADDR@
    errors
    ready @READY@
    kubernetes @DOMAIN@ in-addr.arpa ip6.arpa {
        kubeconfig @KUBECONFIG@
        ttl 5
    }
    cache 5
    loop
}
`)
}

// dnsRole is what CoreDNS's kubernetes plugin lists and watches.
var dnsRole = rbacv1.ClusterRole{
	ObjectMeta: metav1.ObjectMeta{Name: "agentenv:coredns"},
	Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	},
}

// startDNS gives CoreDNS its identity, rights and Corefile and starts it
// in the control plane's namespace; waitDNS waits for it. Between the two
// the nodes come up, so its sync costs Up next to nothing.
func (u *upRun) startDNS(ctx context.Context, ca *CA) error {
	c := u.c
	cl, err := Open(c.AdminKubeconfig())
	if err != nil {
		return err
	}
	rbac := cl.Client.RbacV1()
	role := dnsRole
	if _, err := rbac.ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("CoreDNS's ClusterRole: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: dnsUser}},
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("CoreDNS's ClusterRoleBinding: %w", err)
	}
	kc, err := ca.KubeconfigFor(c.Name, c.APIServerURL(), dnsUser)
	if err != nil {
		return err
	}
	if err := writeFile(c.path("pki", "coredns.kubeconfig"), kc, 0o600); err != nil {
		return err
	}
	conf := c.path("Corefile")
	if err := writeFile(conf, []byte(c.corefile()), 0o644); err != nil {
		return err
	}
	return u.start(ctx, "coredns", nil, CoreDNSBinary(), "-conf", conf)
}

// waitDNS waits until CoreDNS has synced with the apiserver and answers
// kubernetes.default.svc with the kubernetes Service's ClusterIP, asked
// from the host over UDP.
func (u *upRun) waitDNS(ctx context.Context) error {
	c := u.c
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", net.JoinHostPort(c.DNSAddr().String(), "53"))
	}}
	name := "kubernetes.default.svc." + ClusterDomain + "."
	want := c.APIServiceIP().String()
	return u.poll(ctx, "coredns", time.Minute, 100*time.Millisecond, func() (bool, error) {
		resp, err := hc.Get("http://" + net.JoinHostPort(c.DNSAddr().String(), dnsReadyPort) + "/ready")
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("/ready: %s", resp.Status)
		}
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		addrs, err := r.LookupHost(qctx, name)
		if err != nil {
			return false, err
		}
		if len(addrs) != 1 || addrs[0] != want {
			return false, fmt.Errorf("%s is %v, want %s", name, addrs, want)
		}
		return true, nil
	})
}
