package k8scluster

import (
	"net"
	"testing"
)

// HostListener listens on the host's end of the cluster's link, accepting
// and closing every connection until the test ends, and returns its
// address: where a pod's connection leaves every cluster network (the
// stand-in for the internet in the egress tests).
func (c *Cluster) HostListener(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp4", net.JoinHostPort(c.Info.HostIP, "0"))
	if err != nil {
		t.Fatalf("listen on the host's end of the link: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	return l.Addr().String()
}
