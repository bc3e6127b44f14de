package k8scluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentenv/agentenv/sdk/sdktest"
)

// dialIn connects to addr from inside the network namespace bound to nsPath.
func dialIn(nsPath, addr string) error {
	ch := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			ch <- err
			return
		}
		c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
		if err == nil {
			c.Close()
		}
		ch <- err
	}()
	return <-ch
}

// cni runs the node's CNI configuration's plugin (ptp, with host-local
// addresses) as containerd would, for a pod namespace, and returns the
// pod's address on ADD.
func cni(ctx context.Context, n node, command, id, podNS string) (netip.Addr, error) {
	var list struct {
		CNIVersion string           `json:"cniVersion"`
		Name       string           `json:"name"`
		Plugins    []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(n.cniConfig()), &list); err != nil || len(list.Plugins) != 1 {
		return netip.Addr{}, errors.Join(errors.New("the CNI configuration is not one plugin's list"), err)
	}
	conf := list.Plugins[0]
	conf["cniVersion"], conf["name"] = list.CNIVersion, list.Name
	stdin, _ := json.Marshal(conf)
	cmd := exec.CommandContext(ctx, "nsenter", "--net="+n.NetNSPath(), "--", "/usr/lib/cni/"+conf["type"].(string))
	cmd.Env = append(os.Environ(), "CNI_COMMAND="+command, "CNI_CONTAINERID="+id, "CNI_NETNS="+podNS, "CNI_IFNAME=eth0", "CNI_PATH=/usr/lib/cni")
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%s: %w: %s", command, err, out)
	}
	if command != "ADD" {
		return netip.Addr{}, nil
	}
	var res struct {
		IPs []struct {
			Address string `json:"address"`
		} `json:"ips"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res.IPs) == 0 {
		return netip.Addr{}, errors.Join(errors.New("CNI result: "+string(out)), err)
	}
	p, err := netip.ParsePrefix(res.IPs[0].Address)
	return p.Addr(), err
}

// The nodes' pod networks, with the real CNI plugin the kubelets use and no
// Kubernetes: a "pod" on each node gets an address of its node's range,
// and the host and the other node's pod reach it (through the control
// plane's namespace, which routes each node's range to it).
func TestNetworkPodsAcrossNodes(t *testing.T) {
	needRoot(t)
	for _, p := range cniPlugins {
		if _, err := os.Stat("/usr/lib/cni/" + p); err != nil {
			sdktest.Missing(t, "the CNI plugins", err.Error(), "apt-get install containernetworking-plugins")
		}
	}
	c := Config{StateDir: filepath.Join(t.TempDir(), "state"), Name: "aek8s-np",
		Link: netip.MustParsePrefix("10.255.0.244/30"), PodCIDR: netip.MustParsePrefix("10.244.244.0/24")}.Defaults()
	if err := os.MkdirAll(c.StateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.checkNetworkFree(ctx); err != nil {
		t.Fatal(err)
	}
	var pods []string
	t.Cleanup(func() {
		for i, n := range c.nodes() {
			if i < len(pods) {
				if _, err := cni(context.Background(), n, "DEL", "pod", pods[i]); err != nil {
					t.Errorf("CNI DEL on %s: %v", n.Name(), err)
				}
				_ = syscall.Unmount(pods[i], syscall.MNT_DETACH)
			}
		}
		if errs := c.teardownNetwork(context.Background()); len(errs) > 0 {
			t.Errorf("teardown: %v", errors.Join(errs...))
		}
		os.RemoveAll(c.StateDir)
		if left := CheckClean(c); len(left) > 0 {
			t.Errorf("left after teardown: %v", left)
		}
	})
	if err := c.setupNetwork(ctx); err != nil {
		t.Fatal(err)
	}
	var ips []netip.Addr
	for _, n := range c.nodes() {
		if err := os.MkdirAll(n.path("cni", "ipam"), 0o755); err != nil {
			t.Fatal(err)
		}
		ns := n.path("pod-netns")
		if err := os.WriteFile(ns, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := run(ctx, "unshare", "--net="+ns, "true"); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, ns)
		ip, err := cni(ctx, n, "ADD", "pod", ns)
		if err != nil {
			t.Fatalf("CNI ADD on %s: %v", n.Name(), err)
		}
		if !n.PodCIDR().Contains(ip) {
			t.Errorf("pod on %s got %s, outside the node's %s", n.Name(), ip, n.PodCIDR())
		}
		ips = append(ips, ip)
	}
	for i := range pods {
		l := listenIn(t, pods[i], net.JoinHostPort(ips[i].String(), "0"))
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				conn.Close()
			}
		}()
		conn, err := net.DialTimeout("tcp4", l.Addr().String(), 5*time.Second)
		if err != nil {
			t.Errorf("the host cannot reach the pod on node%d at %s: %v", i+1, l.Addr(), err)
		} else {
			conn.Close()
		}
		other := pods[1-i]
		if err := dialIn(other, l.Addr().String()); err != nil {
			t.Errorf("the pod on node%d cannot reach the pod on node%d at %s: %v", 2-i, i+1, l.Addr(), err)
		}
	}
}
