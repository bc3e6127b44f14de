package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/agentenv/agentenv/internal/k8scluster"
	"github.com/agentenv/agentenv/internal/servetest"
)

// BenchmarkK8sRegistryPull is deploy-to-ready (create → Running → its
// port answers from the host) of a GridSim pod whose image the node pulls
// from the cluster's registry, against the floor in the same loop: a bare
// pod of the very same image, now present on the node. Each iteration
// pushes (untimed) a fresh image, GridSim's binary beside a file of random
// bytes, so its one layer is on no node and every byte of it is pulled
// and unpacked; both pods run on the first node, one after the other, and
// the image is removed from the node afterwards (untimed).
func BenchmarkK8sRegistryPull(b *testing.B) {
	c := k8scluster.RequireCapability(b, k8scluster.CapRegistry, k8scluster.CapNodes)
	ns := c.Namespace(b, "bench-registry")
	dir := b.TempDir()
	env, err := os.ReadFile(servetest.Build(b, servetest.GridsimEnv, ""))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gridsim-env"), env, 0o755); err != nil {
		b.Fatal(err)
	}
	node := c.Info.Nodes[0]
	push := func() string {
		if err := os.WriteFile(filepath.Join(dir, "nonce"), []byte(rand.String(64)), 0o644); err != nil {
			b.Fatal(err)
		}
		ref := fmt.Sprintf("%s/bench-gridsim-env:%s", k8scluster.RegistryHost, rand.String(10))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := c.PushImage(ctx, dir, ref, "/gridsim-env", "--host", "0.0.0.0"); err != nil {
			b.Fatal(err)
		}
		return ref
	}
	forget := func(ref string) {
		out, err := exec.Command("ctr", "-a", node.ContainerdSocket, "-n", "k8s.io", "images", "rm", "--sync", ref).CombinedOutput()
		if err != nil {
			b.Fatalf("remove %s from %s: %v: %s", ref, node.Name, err, out)
		}
	}
	one := func(i int) (pull, floor time.Duration) {
		b.StopTimer()
		ref := push()
		b.StartTimer()
		pull = barePodOf(b, c, ns, fmt.Sprintf("pull-%d", i), ref, node.Name)
		floor = barePodOf(b, c, ns, fmt.Sprintf("present-%d", i), ref, node.Name)
		b.StopTimer()
		deletePods(b, c, ns)
		forget(ref)
		b.StartTimer()
		return pull, floor
	}
	one(-1) // warm both paths
	var p, f []time.Duration
	b.ResetTimer()
	for i := range b.N {
		pi, fi := one(i)
		p, f = append(p, pi), append(f, fi)
	}
	b.StopTimer()
	b.ReportMetric(ms(pct(p, 50)), "pull-ready-p50-ms")
	b.ReportMetric(ms(pct(p, 99)), "pull-ready-p99-ms")
	b.ReportMetric(ms(pct(f, 50)), "present-p50-ms")
	b.ReportMetric(ms(pct(f, 99)), "present-p99-ms")
	b.ReportMetric(float64(pct(p, 50))/float64(pct(f, 50)), "x-present-p50")
	b.ReportMetric(float64(pct(p, 99))/float64(pct(f, 99)), "x-present-p99")
}
