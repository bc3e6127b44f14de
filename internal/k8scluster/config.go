// Package k8scluster brings a real two-node Kubernetes cluster up and down
// on this machine, offline, for the project's tests: etcd (Debian's
// etcd-server), kube-apiserver, kube-scheduler and kube-controller-manager
// in a network namespace the host reaches over a veth pair, and two nodes,
// each a namespace of its own behind the control plane's with a kubelet
// and kube-proxy (built from the Go module proxy, cached by version) and
// Debian's containerd and runc. Everything it makes lives in one state
// folder; Down removes it and checks that nothing is left elsewhere.
//
// Tests use Require, which finds the running cluster (started by .ci/run or
// `make k8s-up`), skips without one outside CI and fails under CI=true.
package k8scluster

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
)

// Version is the Kubernetes release the harness builds and runs; the
// wrapper module in k8sbuild/ pins k8s.io/kubernetes to it and every
// staging module to the matching v0 release (a test checks they agree).
const Version = "v1.37.2"

// Components are the binaries built from k8s.io/kubernetes.
var Components = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"}

// Environment variables the harness and Require read.
const (
	// EnvState is the state folder (default DefaultStateDir).
	EnvState = "AGENTENV_K8S_STATE"
	// EnvKubeconfig points tests at a cluster's admin kubeconfig; the
	// cluster.json beside it (when there is one) gives the rest.
	EnvKubeconfig = "AGENTENV_K8S_KUBECONFIG"
	// EnvCache is the folder binaries are cached in, per version.
	EnvCache = "AGENTENV_K8S_CACHE"
	// EnvName, EnvLink and EnvPods override Config's Name, Link and
	// PodCIDR defaults: a second cluster beside the first needs all three
	// (and its own state folder).
	EnvName = "AGENTENV_K8S_NAME"
	EnvLink = "AGENTENV_K8S_LINK"
	EnvPods = "AGENTENV_K8S_PODS"
)

// DefaultStateDir is where the cluster keeps everything when EnvState is
// not set.
const DefaultStateDir = "/tmp/agentenv-k8s"

// Config says where a cluster lives and which addresses it takes. The zero
// value of every field means its default (Defaults fills them in).
type Config struct {
	// StateDir holds every file the cluster makes, its logs and PIDs.
	StateDir string
	// BinDir holds the four Kubernetes binaries (CacheBinDir by default).
	BinDir string
	// Name prefixes the host-side link (Name+"0") and the kubelet's cgroup
	// root, and names the node; at most 12 characters (link names are 15).
	Name string
	// Link is the /30 between the host (first address) and the node
	// (second): the host reaches the apiserver and kubelet at the node's.
	Link netip.Prefix
	// PodCIDR is the pods' bridge network inside the namespace; the host
	// routes it through the node's address.
	PodCIDR netip.Prefix
	// APIPort is the apiserver's secure port on the node address.
	APIPort int

	envErr error // a malformed override in the environment
}

// Defaults returns c with every unset field filled in.
func (c Config) Defaults() Config {
	if c.StateDir == "" {
		c.StateDir = os.Getenv(EnvState)
	}
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir
	}
	if c.BinDir == "" {
		c.BinDir = CacheBinDir()
	}
	if c.Name == "" {
		c.Name = os.Getenv(EnvName)
	}
	if c.Name == "" {
		c.Name = "agentenv-k8s"
	}
	for _, e := range []struct {
		name string
		p    *netip.Prefix
	}{{EnvLink, &c.Link}, {EnvPods, &c.PodCIDR}} {
		if v := os.Getenv(e.name); v != "" && !e.p.IsValid() {
			p, err := netip.ParsePrefix(v)
			if err != nil {
				c.envErr = fmt.Errorf("%s=%q: %w", e.name, v, err)
			}
			*e.p = p
		}
	}
	if !c.Link.IsValid() {
		// 10.255.0.0/30: clear of Docker's pools and of sandbox-local's
		// 10.213.0.0/16.
		c.Link = netip.MustParsePrefix("10.255.0.0/30")
	}
	if !c.PodCIDR.IsValid() {
		c.PodCIDR = netip.MustParsePrefix("10.244.0.0/22")
	}
	if c.APIPort == 0 {
		c.APIPort = 16443
	}
	return c
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.envErr != nil:
		return c.envErr
	case c.StateDir == "" || !filepath.IsAbs(c.StateDir):
		return fmt.Errorf("state folder %q: must be an absolute path", c.StateDir)
	case filepath.Clean(c.StateDir) == "/":
		return fmt.Errorf("state folder %q: cannot be /", c.StateDir)
	case len(c.Name) == 0 || len(c.Name) > 12:
		return fmt.Errorf("cluster name %q: must be 1 to 12 characters (it prefixes a network link name)", c.Name)
	case c.Link.Bits() != 30 || !c.Link.Addr().Is4():
		return fmt.Errorf("link network %s: must be an IPv4 /30", c.Link)
	case !c.PodCIDR.Addr().Is4() || c.PodCIDR.Bits() > 24 || c.PodCIDR.Bits() < 16:
		return fmt.Errorf("pod network %s: must be an IPv4 /16 to /24", c.PodCIDR)
	case c.PodCIDR.Overlaps(c.Link):
		return fmt.Errorf("pod network %s overlaps the link network %s", c.PodCIDR, c.Link)
	}
	for _, r := range c.Name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return fmt.Errorf("cluster name %q: only a-z, 0-9 and - are allowed", c.Name)
		}
	}
	return nil
}

// HostIP is the host's end of the veth pair.
func (c Config) HostIP() netip.Addr { return c.Link.Masked().Addr().Next() }

// NodeIP is the control plane's address, the link's second: the apiserver
// listens on it.
func (c Config) NodeIP() netip.Addr { return c.HostIP().Next() }

// HostLink and NodeLink name the veth ends.
func (c Config) HostLink() string { return truncate(c.Name, 12) + "-h" }

// NodeLink is the veth end inside the control plane's namespace.
func (c Config) NodeLink() string { return "eth0" }

// CgroupRoot is the cgroup under which the kubelet puts every pod, in each
// v1 hierarchy: one of its own, so two harness clusters (or another
// kubelet's kubepods) never share one, and Down removes exactly it.
func (c Config) CgroupRoot() string { return "/" + c.Name }

// Paths inside the state folder.
func (c Config) path(p ...string) string { return filepath.Join(append([]string{c.StateDir}, p...)...) }

// NetNSPath is the file the cluster's network namespace is bound to (kept
// in the state folder, not /run/netns, so nothing is left outside it).
func (c Config) NetNSPath() string { return c.path("netns") }

// AdminKubeconfig is the cluster-admin kubeconfig (server: the node IP).
func (c Config) AdminKubeconfig() string { return c.path("admin.kubeconfig") }

// InfoPath is the cluster.json Up writes once the cluster is ready.
func (c Config) InfoPath() string { return c.path("cluster.json") }

// APIServerURL is the apiserver's address as the host reaches it.
func (c Config) APIServerURL() string {
	return fmt.Sprintf("https://%s", netip.AddrPortFrom(c.NodeIP(), uint16(c.APIPort)))
}

// CacheBinDir is where the binaries of Version are cached:
// ${AGENTENV_K8S_CACHE:-$HOME/.cache/agentenv-k8s}/<version>/bin.
func CacheBinDir() string { return filepath.Join(CacheDir(), Version, "bin") }

// CacheDir is the root of the binary cache.
func CacheDir() string {
	if d := os.Getenv(EnvCache); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = "/root"
	}
	return filepath.Join(home, ".cache", "agentenv-k8s")
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
