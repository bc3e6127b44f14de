package k8scluster

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentenv/agentenv/sdk/sdktest"
)

// needRoot skips a test that makes namespaces and links when it cannot,
// except under CI=true (CI runs as root).
func needRoot(t *testing.T) {
	t.Helper()
	var why string
	if os.Geteuid() != 0 {
		why = "needs root"
	}
	for _, tool := range []string{"ip", "nsenter", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			why = tool + " missing"
		}
	}
	if why == "" {
		return
	}
	sdktest.Missing(t, "root with iproute2 and util-linux (the cluster's network)", why, "run as root; apt-get install iproute2 util-linux")
}

// listenIn opens a TCP listener inside the network namespace bound to
// nsPath: the socket belongs to the namespace whatever thread accepts.
func listenIn(t *testing.T, nsPath, addr string) net.Listener {
	t.Helper()
	type res struct {
		l   net.Listener
		err error
	}
	ch := make(chan res)
	go func() {
		// The thread is never unlocked: Go ends it with the goroutine,
		// so no other goroutine ever runs in the namespace.
		runtime.LockOSThread()
		fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- res{err: err}
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			ch <- res{err: err}
			return
		}
		l, err := net.Listen("tcp4", addr)
		ch <- res{l, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("listen in the namespace: %v", r.err)
	}
	t.Cleanup(func() { r.l.Close() })
	return r.l
}

// The cluster's network, on its own: the host reaches the node's address
// through the veth, the host routes the pod network through it, the
// namespace reaches nothing beyond the link (its default route is
// unreachable), forwarding is on in the namespace and untouched on the
// host, and teardown leaves nothing. It uses its own names and addresses,
// so it runs beside a cluster that is up.
func TestNetworkSetupTeardown(t *testing.T) {
	needRoot(t)
	c := Config{StateDir: filepath.Join(t.TempDir(), "state"), Name: "aek8s-nt",
		Link: netip.MustParsePrefix("10.255.0.252/30"), PodCIDR: netip.MustParsePrefix("10.244.252.0/24")}.Defaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(c.StateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hostForward, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err := c.checkNetworkFree(ctx); err != nil {
		t.Fatal(err)
	}
	torn := false
	teardown := func() {
		if torn {
			return
		}
		torn = true
		if errs := c.teardownNetwork(context.Background()); len(errs) > 0 {
			t.Errorf("teardown: %v", errors.Join(errs...))
		}
		os.RemoveAll(c.StateDir)
	}
	t.Cleanup(teardown)
	if err := c.setupNetwork(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.checkNetworkFree(ctx); err == nil {
		t.Error("checkNetworkFree passes while the network is up: a second Up would collide")
	}

	// Down of another state folder with the same name (an Up that failed
	// its preflight because this one is up) leaves this cluster's link.
	other := c
	other.StateDir = filepath.Join(t.TempDir(), "other")
	if err := Down(ctx, other, nil); err == nil || !strings.Contains(err.Error(), "network link "+c.HostLink()) {
		t.Errorf("Down of another state folder: %v; want it to report (not remove) the link", err)
	}
	if _, err := os.Stat("/sys/class/net/" + c.HostLink()); err != nil {
		t.Fatalf("Down of another state folder removed this cluster's link: %v", err)
	}

	l := listenIn(t, c.NetNSPath(), c.NodeIP().String()+":0")
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conn.Write([]byte("node"))
			conn.Close()
		}
	}()
	conn, err := net.DialTimeout("tcp4", l.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatalf("the host cannot reach the node address %s: %v", l.Addr(), err)
	}
	buf := make([]byte, 4)
	if _, err := conn.Read(buf); err != nil || string(buf) != "node" {
		t.Errorf("read %q, %v", buf, err)
	}
	conn.Close()

	for _, n := range c.nodes() {
		pod := addrIn(n.PodCIDR(), 2).String()
		out, err := exec.Command("ip", "-4", "route", "get", pod).CombinedOutput()
		if err != nil || !contains(string(out), "via "+c.NodeIP().String()+" dev "+c.HostLink()) {
			t.Errorf("the host does not route %s's pods through the control plane: %s %v", n.Name(), out, err)
		}
		// The control plane routes them on to their node, which sends
		// everything else back to the control plane.
		out, err = exec.Command("nsenter", "--net="+c.NetNSPath(), "--", "ip", "-4", "route", "get", pod).CombinedOutput()
		if err != nil || !contains(string(out), "via "+n.IP().String()+" dev "+n.cpLink()) {
			t.Errorf("the control plane does not route %s to %s: %s %v", pod, n.Name(), out, err)
		}
		out, err = exec.Command("nsenter", "--net="+n.NetNSPath(), "--", "ip", "-4", "route", "get", c.HostIP().String()).CombinedOutput()
		if err != nil || !contains(string(out), "via "+n.peerIP().String()+" dev eth0") {
			t.Errorf("%s does not route the host through the control plane: %s %v", n.Name(), out, err)
		}
	}
	out, err := exec.Command("nsenter", "--net="+c.NetNSPath(), "--", "ip", "-4", "route", "get", c.APIServiceIP().String()).CombinedOutput()
	if err != nil || !contains(string(out), "via "+c.nodes()[0].IP().String()) {
		t.Errorf("the control plane does not send ClusterIPs to the first node: %s %v", out, err)
	}
	// From inside the namespace, an address beyond the link is unreachable.
	out, err = exec.Command("nsenter", "--net="+c.NetNSPath(), "--", "ip", "-4", "route", "get", "192.0.2.1").CombinedOutput()
	if err == nil || !contains(string(out), "No route to host") {
		t.Errorf("the namespace routes beyond its link: %s %v", out, err)
	}
	out, err = exec.Command("nsenter", "--net="+c.NetNSPath(), "--", "cat", "/proc/sys/net/ipv4/ip_forward").CombinedOutput()
	if err != nil || string(out) != "1\n" {
		t.Errorf("forwarding in the namespace: %q %v", out, err)
	}
	if now, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); string(now) != string(hostForward) {
		t.Errorf("the host's ip_forward changed from %q to %q", hostForward, now)
	}

	teardown()
	if left := CheckClean(c); len(left) > 0 {
		t.Errorf("left after teardown: %v", left)
	}
	var st syscall.Stat_t
	if err := syscall.Stat("/sys/class/net/"+c.HostLink(), &st); err == nil {
		t.Errorf("link %s still there", c.HostLink())
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
