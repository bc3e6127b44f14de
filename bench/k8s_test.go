package bench

// Benchmarks of the Kubernetes sandbox on the real test cluster of
// internal/k8scluster, each against a floor measured in the same loop: a
// bare pod of the same image created with client-go, followed to Running
// and dialled until its port answers. Without a cluster they skip (outside
// CI). docs/performance.md has the numbers.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/agentenv/client"
	"github.com/agentenv/agentenv/internal/k8scluster"
	"github.com/agentenv/agentenv/internal/servetest"
	k8s "github.com/agentenv/agentenv/plugins/sandbox-k8s"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

const k8sGridsimImage = "agentenv-gridsim-env:1"

var (
	k8sImageOnce sync.Once
	k8sImageErr  error
)

// k8sBench is the cluster with GridSim's image imported and a namespace
// of the benchmark's own.
func k8sBench(b *testing.B) (*k8scluster.Cluster, string) {
	b.Helper()
	c := k8scluster.Require(b)
	bin := servetest.Build(b, servetest.GridsimEnv, "")
	k8sImageOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		k8sImageErr = c.ImportImage(ctx, bin, k8sGridsimImage, "/"+filepath.Base(bin), "--host", "0.0.0.0")
	})
	if k8sImageErr != nil {
		b.Fatal(k8sImageErr)
	}
	return c, c.Namespace(b, "bench-k8s")
}

// k8sSettings is the plugin's configuration for the benchmarks.
func k8sSettings(c *k8scluster.Cluster, ns string) map[string]any {
	return map[string]any{"kubeconfig": c.Info.Kubeconfig, "namespace": ns, "run_as_user": 65534,
		"cpu_request_fraction": 0.02, "memory_request_fraction": 0.25, "server_cidrs": []string{c.Info.HostIP + "/32"}}
}

// k8sPlugin is the plugin over real gRPC, configured for ns.
func k8sPlugin(b *testing.B, c *k8scluster.Cluster, ns string) *sandbox.Client {
	b.Helper()
	p := k8s.New()
	p.SetLogger(hclog.NewNullLogger())
	raw, _ := json.Marshal(k8sSettings(c, ns))
	if err := p.Configure(context.Background(), raw); err != nil {
		b.Fatal(err)
	}
	return sdktest.Sandbox(b, p)
}

// gridsimSpec is GridSim's env as env.toml declares it.
func gridsimSpec(labels map[string]string) sandbox.Spec {
	return sandbox.Spec{Env: "gridsim", Image: k8sGridsimImage, Port: 18765, CPU: 0.25, MemoryMB: 64, Labels: labels}
}

// barePod is the floor: a plain pod of the same image, port and limits
// (no policy, no Secret, no gate), created with client-go, watched to
// Running, then dialled until it answers.
func barePod(b *testing.B, c *k8scluster.Cluster, ns, name string) time.Duration {
	b.Helper()
	return barePodOf(b, c, ns, name, k8sGridsimImage, "")
}

// barePodOf is barePod of image (IfNotPresent), on node when not empty.
func barePodOf(b *testing.B, c *k8scluster.Cluster, ns, name, image, node string) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	uid := int64(65534)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench": "bare"}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, SecurityContext: &corev1.PodSecurityContext{RunAsUser: &uid},
			NodeName: node,
			Containers: []corev1.Container{{Name: "env", Image: image,
				Env:   []corev1.EnvVar{{Name: sandbox.EnvPort, Value: "18765"}},
				Ports: []corev1.ContainerPort{{ContainerPort: 18765}},
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}}}}
	t := time.Now()
	created, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: created.ResourceVersion})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	ip := ""
	for ip == "" {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatalf("watch of %s ended", name)
			}
			if p, ok := ev.Object.(*corev1.Pod); ok && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				ip = p.Status.PodIP
			}
		case <-ctx.Done():
			b.Fatalf("bare pod %s not Running", name)
		}
	}
	addr := net.JoinHostPort(ip, "18765")
	wait := time.Millisecond
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return time.Since(t)
		}
		if ctx.Err() != nil {
			b.Fatalf("bare pod %s never answered: %v", name, err)
		}
		time.Sleep(wait)
		wait = min(wait*2, 50*time.Millisecond)
	}
}

// deletePods deletes the namespace's pods and waits until they are gone,
// so that no teardown competes with the next measurement.
func deletePods(b *testing.B, c *k8scluster.Cluster, ns string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		b.Fatal(err)
	}
	for {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if len(pods.Items) == 0 {
			return
		}
		if ctx.Err() != nil {
			b.Fatalf("%d pods still in %s", len(pods.Items), ns)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func pct(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*p/100)]
}

// BenchmarkK8sDeployToReady deploys GridSim's env through the plugin (over
// real gRPC: the gated pod, its NetworkPolicy, the gate lifted, watched to
// Running, dialled until it answers) and, in the same loop, a bare pod of
// the same image (the floor). Target: p50 within 1.2x the floor.
func BenchmarkK8sDeployToReady(b *testing.B) {
	c, ns := k8sBench(b)
	sb := k8sPlugin(b, c, ns)
	ctx := context.Background()
	ours := func(i int) time.Duration {
		t := time.Now()
		dctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		if _, err := sb.Deploy(dctx, gridsimSpec(map[string]string{sandbox.LabelDeploy: "b" + strconv.Itoa(i)})); err != nil {
			b.Fatal(err)
		}
		return time.Since(t)
	}
	for i := range 2 { // warm both paths
		ours(-1 - i)
		barePod(b, c, ns, fmt.Sprintf("warmup-%d", i))
		deletePods(b, c, ns)
	}
	var o, f []time.Duration
	b.ResetTimer()
	for i := range b.N {
		o = append(o, ours(i))
		f = append(f, barePod(b, c, ns, fmt.Sprintf("bare-%d", i)))
		b.StopTimer()
		deletePods(b, c, ns)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(ms(pct(o, 50)), "deploy-ready-p50-ms")
	b.ReportMetric(ms(pct(o, 99)), "deploy-ready-p99-ms")
	b.ReportMetric(ms(pct(f, 50)), "bare-pod-p50-ms")
	b.ReportMetric(ms(pct(f, 99)), "bare-pod-p99-ms")
	b.ReportMetric(float64(pct(o, 50))/float64(pct(f, 50)), "x-bare-p50")
	b.ReportMetric(float64(pct(o, 99))/float64(pct(f, 99)), "x-bare-p99")
}

// BenchmarkK8sDeploy100 deploys 100 GridSim envs at once through the
// plugin, and 100 bare pods at once (the floor), each until every one
// answers; one of each per iteration.
func BenchmarkK8sDeploy100(b *testing.B) {
	const n = 100
	c, ns := k8sBench(b)
	sb := k8sPlugin(b, c, ns)
	all := func(one func(i int)) time.Duration {
		t := time.Now()
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() { defer wg.Done(); one(i) }()
		}
		wg.Wait()
		return time.Since(t)
	}
	var o, f []time.Duration
	b.ResetTimer()
	for it := range b.N {
		o = append(o, all(func(i int) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if _, err := sb.Deploy(ctx, gridsimSpec(map[string]string{sandbox.LabelDeploy: fmt.Sprint(it, "-", i)})); err != nil {
				b.Error(err)
			}
		}))
		b.StopTimer()
		deletePods(b, c, ns)
		b.StartTimer()
		f = append(f, all(func(i int) { barePod(b, c, ns, fmt.Sprintf("bare-%d-%d", it, i)) }))
		b.StopTimer()
		deletePods(b, c, ns)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(pct(o, 50).Seconds(), "plugin-100-s")
	b.ReportMetric(pct(f, 50).Seconds(), "bare-100-s")
	b.ReportMetric(float64(pct(o, 50))/float64(pct(f, 50)), "x-bare")
}

// BenchmarkK8sReset resets GridSim episodes through `agentenv serve
// --sandbox k8s`, one at a time, on a server with --warm 4 (the reset
// takes a ready pod) and on one without (the reset deploys one); the
// warm server's refill is waited for before the cold reset. Reported:
// reset p50s and their ratio.
func BenchmarkK8sReset(b *testing.B) {
	c, ns := k8sBench(b)
	agentenv, _ := binaries(b)
	cfg, _ := json.Marshal(k8sSettings(c, ns))
	cfgFile := filepath.Join(b.TempDir(), "k8s.json")
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		b.Fatal(err)
	}
	serve := func(extra ...string) string {
		addr := freePort(b)
		args := append([]string{"serve", gridsimDir, "--addr", addr, "--log-level", "warn", "--sandbox", "k8s", "--sandbox-config", cfgFile}, extra...)
		start(b, addr, "/health", agentenv, args...)
		return addr
	}
	warm, cold := serve("--warm", "4"), serve()
	refilled := func() {
		deadline := time.Now().Add(3 * time.Minute)
		for {
			pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: sandbox.LabelEpisode + "=warm"})
			if err != nil {
				b.Fatal(err)
			}
			ready := 0
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					ready++
				}
			}
			if ready >= 4 {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("the warm pool holds %d of 4", ready)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	ctx := context.Background()
	ws, cs := dial(b, warm), dial(b, cold)
	reset := func(s *client.Session, i int) time.Duration {
		t := time.Now()
		if _, err := s.Reset(ctx, client.ResetRequest{Split: "eval", Index: i % 200}); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t)
		if _, err := s.Step(ctx, idleReply); err != nil {
			b.Fatal(err)
		}
		if res, err := s.Step(ctx, "done"); err != nil || !res.Done {
			b.Fatalf("final reply: %v", err)
		}
		return d
	}
	refilled()
	var wr, cr []time.Duration
	b.ResetTimer()
	for i := range b.N {
		wr = append(wr, reset(ws, i))
		b.StopTimer()
		refilled()
		b.StartTimer()
		cr = append(cr, reset(cs, i))
	}
	b.StopTimer()
	b.ReportMetric(ms(pct(wr, 50)), "reset-warm-p50-ms")
	b.ReportMetric(ms(pct(cr, 50)), "reset-cold-p50-ms")
	b.ReportMetric(float64(pct(wr, 50))/float64(pct(cr, 50)), "warm-x-cold")
}
