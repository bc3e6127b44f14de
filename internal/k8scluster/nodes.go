package k8scluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
)

// NodeCount is how many worker nodes a cluster has. The pod network is cut
// in four: a quarter of pod addresses for each node, a quarter for the
// links between the control plane and the nodes, and a quarter for
// Service ClusterIPs, so the host's one route to the pod network reaches
// all of them.
const NodeCount = 2

// node is one worker node: a network namespace of its own, joined to the
// control plane's by a veth pair (n<i> there, eth0 in the node), with its
// own containerd, kubelet and kube-proxy, its own pod addresses (a point-to-
// point veth per pod, routed by the node) and its own folder, node<i>/, in
// the state folder.
type node struct {
	c     Config
	index int // 1-based
}

// nodes are the cluster's worker nodes.
func (c Config) nodes() []node {
	ns := make([]node, NodeCount)
	for i := range ns {
		ns[i] = node{c: c, index: i + 1}
	}
	return ns
}

// quarter is the k-th quarter (0-3) of the pod network.
func (c Config) quarter(k int) netip.Prefix {
	p := c.PodCIDR.Masked()
	bits := p.Bits() + 2
	base := binary.BigEndian.Uint32(p.Addr().AsSlice())
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], base+uint32(k)<<(32-bits))
	return netip.PrefixFrom(netip.AddrFrom4(b), bits)
}

// addrIn is the n-th address of p.
func addrIn(p netip.Prefix, n int) netip.Addr {
	a := p.Masked().Addr()
	for range n {
		a = a.Next()
	}
	return a
}

// ClusterPodCIDR holds every node's pod addresses (the first half of the
// pod network): kube-proxy's cluster CIDR.
func (c Config) ClusterPodCIDR() netip.Prefix {
	return netip.PrefixFrom(c.PodCIDR.Masked().Addr(), c.PodCIDR.Bits()+1)
}

// ServiceCIDR is the Service ClusterIP range (the pod network's last quarter).
func (c Config) ServiceCIDR() netip.Prefix { return c.quarter(3) }

// APIServiceIP is the ClusterIP of the default namespace's kubernetes Service.
func (c Config) APIServiceIP() netip.Addr { return addrIn(c.ServiceCIDR(), 1) }

// Name is the Kubernetes node's name.
func (n node) Name() string { return fmt.Sprintf("%s-node%d", n.c.Name, n.index) }

func (n node) path(p ...string) string {
	return filepath.Join(append([]string{n.c.StateDir, fmt.Sprintf("node%d", n.index)}, p...)...)
}

// comp names a per-node component's log and PID files: kubelet-node1.
func (n node) comp(name string) string { return fmt.Sprintf("%s-node%d", name, n.index) }

// link is the /30 between the control plane (first address) and the node.
func (n node) link() netip.Prefix {
	return netip.PrefixFrom(addrIn(n.c.quarter(2), 4*(n.index-1)), 30)
}

// IP is the node's address: its kubelet listens there.
func (n node) IP() netip.Addr { return addrIn(n.link(), 2) }

// peerIP is the control plane's end of the node's link.
func (n node) peerIP() netip.Addr { return addrIn(n.link(), 1) }

// PodCIDR is the node's pod addresses.
func (n node) PodCIDR() netip.Prefix { return n.c.quarter(n.index - 1) }

// gateway is the pods' next hop: the node's end of every pod's veth.
func (n node) gateway() netip.Addr { return addrIn(n.PodCIDR(), 1) }

// cpLink is the node's link as the control plane's namespace names it.
func (n node) cpLink() string { return fmt.Sprintf("n%d", n.index) }

// NetNSPath is the file the node's network namespace is bound to.
func (n node) NetNSPath() string { return n.path("netns") }

// ContainerdSocket is the node's containerd (CRI) socket.
func (n node) ContainerdSocket() string { return n.path("containerd", "containerd.sock") }

// CgroupRoot is where the kubelet puts the node's pods, under the cluster's.
func (n node) CgroupRoot() string { return fmt.Sprintf("%s/node%d", n.c.CgroupRoot(), n.index) }

// NodeInfo is one node as cluster.json records it.
type NodeInfo struct {
	Name             string `json:"name"`
	IP               string `json:"ip"`
	PodCIDR          string `json:"pod_cidr"`
	NetNS            string `json:"netns"`
	ContainerdSocket string `json:"containerd_socket"`
}

func (n node) info() NodeInfo {
	return NodeInfo{Name: n.Name(), IP: n.IP().String(), PodCIDR: n.PodCIDR().String(), NetNS: n.NetNSPath(), ContainerdSocket: n.ContainerdSocket()}
}

// setupNodeNetwork makes the node's namespace and its link to the control
// plane's: the node's default route is the control plane (whose own is
// unreachable, so nothing leaves the machine), and the control plane
// routes the node's pods to it.
func (n node) setupNodeNetwork(ctx context.Context) error {
	c := n.c
	if err := os.MkdirAll(n.path(), 0o755); err != nil {
		return err
	}
	ns := n.NetNSPath()
	if err := os.WriteFile(ns, nil, 0o600); err != nil {
		return err
	}
	if err := run(ctx, "unshare", "--net="+ns, "true"); err != nil {
		return fmt.Errorf("create %s's network namespace: %w", n.Name(), err)
	}
	inNode := func(args ...string) error {
		return run(ctx, "nsenter", append([]string{"--net=" + ns, "--"}, args...)...)
	}
	// Both namespaces are files: ip takes a path for the peer's.
	if err := c.inNS(ctx, "ip", "link", "add", n.cpLink(), "type", "veth", "peer", "name", "eth0", "netns", ns); err != nil {
		return err
	}
	bits := fmt.Sprintf("/%d", n.link().Bits())
	steps := []struct {
		node bool
		argv []string
	}{
		{false, []string{"ip", "addr", "add", n.peerIP().String() + bits, "dev", n.cpLink()}},
		{false, []string{"ip", "link", "set", n.cpLink(), "up"}},
		{false, []string{"ip", "route", "add", n.PodCIDR().String(), "via", n.IP().String(), "dev", n.cpLink()}},
		{true, []string{"ip", "link", "set", "lo", "up"}},
		{true, []string{"ip", "addr", "add", n.IP().String() + bits, "dev", "eth0"}},
		{true, []string{"ip", "link", "set", "eth0", "up"}},
		{true, []string{"ip", "route", "add", "default", "via", n.peerIP().String(), "dev", "eth0"}},
		{true, []string{"sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"}},
	}
	for _, s := range steps {
		var err error
		if s.node {
			err = inNode(s.argv...)
		} else {
			err = c.inNS(ctx, s.argv[0], s.argv[1:]...)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Capabilities a cluster records in cluster.json (Info.Capabilities), for
// tests to RequireCapability.
const (
	// CapNodes: two worker nodes, each its own network namespace.
	CapNodes = "nodes"
	// CapServices: kube-proxy on every node; ClusterIPs and NodePorts
	// answer from pods, nodes and the host.
	CapServices = "services"
)

// Has reports whether the cluster records capability cp.
func (i Info) Has(cp string) bool {
	for _, c := range i.Capabilities {
		if c == cp {
			return true
		}
	}
	return false
}

// nodeComponents are the processes each node runs, in the order Down stops
// them (containerd last: the others use it or its pods).
var nodeComponents = []string{kubeRouter, "kube-proxy", "kubelet", "containerd"}
