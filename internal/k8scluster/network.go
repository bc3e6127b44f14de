package k8scluster

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// The cluster's network: a network namespace bound to <state>/netns, a veth
// pair (host end <name>-h with the /30's first address, node end eth0 with
// the second), the pods' bridge behind the node end, and one host route to
// the pod network through the node. Forwarding is switched on inside the
// namespace only; the namespace has no default route but an unreachable
// one, so pod traffic never leaves the machine: pods reach the node and the
// host's end of the link, nothing else.

// run runs a command and returns its error with its output.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// inNS runs a command inside the cluster's network namespace.
func (c Config) inNS(ctx context.Context, name string, args ...string) error {
	return run(ctx, "nsenter", append([]string{"--net=" + c.NetNSPath(), "--", name}, args...)...)
}

// checkNetworkFree fails when the host already has a link, address or
// route the cluster would take.
func (c Config) checkNetworkFree(ctx context.Context) error {
	if _, err := os.Stat("/sys/class/net/" + c.HostLink()); err == nil {
		return fmt.Errorf("network link %s already exists: another cluster of this name is up or was left behind (run `down`)", c.HostLink())
	}
	out, err := exec.CommandContext(ctx, "ip", "-4", "-o", "addr", "show").Output()
	if err != nil {
		return fmt.Errorf("ip addr show: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] != "inet" {
				continue
			}
			if p, err := netip.ParsePrefix(f[i+1]); err == nil && (p.Overlaps(c.Link) || p.Overlaps(c.PodCIDR)) {
				return fmt.Errorf("the host already has address %s on %s, inside the cluster's networks %s / %s: choose others", p, f[1], c.Link, c.PodCIDR)
			}
		}
	}
	routes, err := hostRoutes(ctx)
	if err != nil {
		return err
	}
	for _, r := range routes {
		if r.dst.Overlaps(c.PodCIDR) || r.dst.Overlaps(c.Link) {
			return fmt.Errorf("the host already routes %s (%s), inside the cluster's networks %s / %s", r.dst, r.line, c.Link, c.PodCIDR)
		}
	}
	return nil
}

type route struct {
	dst  netip.Prefix
	line string
}

// hostRoutes lists the host's IPv4 routes with a destination prefix (the
// default route excluded).
func hostRoutes(ctx context.Context) ([]route, error) {
	out, err := exec.CommandContext(ctx, "ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return nil, fmt.Errorf("ip route show: %w", err)
	}
	var rs []route
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		dst := f[0]
		if dst == "unreachable" || dst == "blackhole" || dst == "prohibit" || dst == "local" || dst == "broadcast" {
			if len(f) < 2 {
				continue
			}
			dst = f[1]
		}
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if p, err := netip.ParsePrefix(dst); err == nil {
			rs = append(rs, route{dst: p, line: line})
		}
	}
	return rs, nil
}

// setupNetwork makes the namespace, the link and the route. What it made is
// undone by teardownNetwork, also after a failure half-way.
func (c Config) setupNetwork(ctx context.Context) error {
	ns := c.NetNSPath()
	if err := os.WriteFile(ns, nil, 0o600); err != nil {
		return err
	}
	// unshare binds the new namespace to the file: it lives until Down
	// unmounts it, with no process holding it.
	if err := run(ctx, "unshare", "--net="+ns, "true"); err != nil {
		return fmt.Errorf("create the network namespace: %w", err)
	}
	if err := c.own("netns"); err != nil {
		return err
	}
	// The veth is made on the host with its peer sent into the namespace by
	// its file, so no name is ever needed in /run/netns. (Not the other
	// way, to our PID: the process's namespace is its main thread's, which
	// a goroutine locked to it may have moved.)
	if err := run(ctx, "ip", "link", "add", c.HostLink(), "type", "veth", "peer", "name", c.NodeLink(), "netns", ns); err != nil {
		return err
	}
	if err := c.own("link"); err != nil {
		return err
	}
	host, node := c.HostIP().String()+"/30", c.NodeIP().String()+"/30"
	steps := [][]string{
		{"host", "ip", "addr", "add", host, "dev", c.HostLink()},
		{"host", "ip", "link", "set", c.HostLink(), "up"},
		{"ns", "ip", "link", "set", "lo", "up"},
		{"ns", "ip", "addr", "add", node, "dev", c.NodeLink()},
		{"ns", "ip", "link", "set", c.NodeLink(), "up"},
		// Nothing leaves the namespace but to the link's /30.
		{"ns", "ip", "route", "add", "unreachable", "default"},
		{"ns", "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"},
		{"host", "ip", "route", "add", c.PodCIDR.Masked().String(), "via", c.NodeIP().String(), "dev", c.HostLink()},
	}
	for _, s := range steps {
		var err error
		if s[0] == "host" {
			err = run(ctx, s[1], s[2:]...)
		} else {
			err = c.inNS(ctx, s[1], s[2:]...)
		}
		if err != nil {
			return err
		}
	}
	for _, n := range c.nodes() {
		if err := n.setupNodeNetwork(ctx); err != nil {
			return err
		}
	}
	// ClusterIPs from the host are taken to the first node, whose
	// kube-proxy translates them (and masquerades, the host being outside
	// the cluster, so replies come back through it).
	return c.inNS(ctx, "ip", "route", "add", c.ServiceCIDR().String(), "via", c.nodes()[0].IP().String())
}

// teardownNetwork removes the host route and link (deleting the host end
// deletes the pair) and unbinds the namespace, which goes once no process
// is left in it. It touches only what this state folder's Up made: a link
// of the same name is another cluster's otherwise.
func (c Config) teardownNetwork(ctx context.Context) []error {
	var errs []error
	if _, err := os.Stat("/sys/class/net/" + c.HostLink()); err == nil && c.owns("link") {
		_ = run(ctx, "ip", "route", "del", c.PodCIDR.Masked().String(), "via", c.NodeIP().String(), "dev", c.HostLink())
		if err := run(ctx, "ip", "link", "del", c.HostLink()); err != nil {
			errs = append(errs, err)
		}
	}
	for _, ns := range append([]string{c.NetNSPath()}, c.nodePaths(node.NetNSPath)...) {
		if isMountPoint(ns) {
			if err := syscall.Unmount(ns, syscall.MNT_DETACH); err != nil {
				errs = append(errs, fmt.Errorf("unmount %s: %w", ns, err))
			}
		}
	}
	return errs
}

// netNSInode is the inode of the cluster's network namespace, 0 if none.
func (c Config) netNSInode() uint64 { return nsInode(c.NetNSPath()) }

// netNSInodes are the inodes of the control plane's and nodes' namespaces.
func (c Config) netNSInodes() []uint64 {
	var inos []uint64
	for _, p := range append([]string{c.NetNSPath()}, c.nodePaths(node.NetNSPath)...) {
		if ino := nsInode(p); ino != 0 {
			inos = append(inos, ino)
		}
	}
	return inos
}

func (c Config) nodePaths(f func(node) string) []string {
	var ps []string
	for _, n := range c.nodes() {
		ps = append(ps, f(n))
	}
	return ps
}

func nsInode(path string) uint64 {
	if !isMountPoint(path) {
		return 0
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	return st.Ino
}

// mountPoints lists the host mount namespace's mount points.
func mountPoints() []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var mps []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 {
			mps = append(mps, unescapeMount(f[4]))
		}
	}
	return mps
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isMountPoint(p string) bool {
	for _, m := range mountPoints() {
		if m == p {
			return true
		}
	}
	return false
}
