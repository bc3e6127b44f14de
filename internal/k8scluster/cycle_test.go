package k8scluster

import (
	"context"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/agentenv/sdk/sdktest"
)

// TestMain lets the test binary be the harness's node-exec, as Up
// re-executes itself (os.Executable) to start containerd.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "node-exec" {
		fs := flag.NewFlagSet("node-exec", flag.ExitOnError)
		state := fs.String("state", "", "")
		index := fs.Int("node", 1, "")
		_ = fs.Parse(os.Args[2:])
		if err := NodeExec(*state, *index, fs.Args()); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
	}
	code := m.Run()
	if probeBuild.bin != "" {
		os.RemoveAll(filepath.Dir(probeBuild.bin))
	}
	os.Exit(code)
}

// A whole second cluster, up and down: it runs a pod, and after Down
// nothing of it is left (CheckClean, and the host paths the node binds
// over hold nothing). It takes a minute or two and a second kubelet, so
// it runs in CI or when AGENTENV_K8S_CYCLE_TEST=1; it uses its own name,
// addresses and state folder, so it runs beside the tests' cluster.
func TestUpDownCycle(t *testing.T) {
	if os.Getenv("CI") != "true" && os.Getenv("AGENTENV_K8S_CYCLE_TEST") != "1" {
		t.Skip("a full up/down cycle: set AGENTENV_K8S_CYCLE_TEST=1 (CI runs it)")
	}
	needRoot(t)
	if err := CheckBinaries(CacheBinDir()); err != nil {
		sdktest.Missing(t, "the test cluster's binaries", err.Error(), "run `make k8s-up` once (.ci/run builds them)")
	}
	cfg := Config{
		StateDir: filepath.Join(os.TempDir(), "agentenv-k8s-cycle-test"),
		Name:     "aek8s-cycle",
		Link:     netip.MustParsePrefix("10.255.0.8/30"),
		PodCIDR:  netip.MustParsePrefix("10.244.16.0/22"),
	}.Defaults()
	log := hclog.New(&hclog.LoggerOptions{Name: "cycle", Output: testWriter{t}, Level: hclog.Info})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		if left := CheckClean(cfg); len(left) > 0 {
			_ = Down(context.Background(), cfg, log)
		}
	})
	t0 := time.Now()
	c, err := Up(ctx, cfg, UpOptions{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("up in %s", time.Since(t0).Round(10*time.Millisecond))
	again, err := Up(ctx, cfg, UpOptions{Log: log})
	if err != nil || again.Info.Started != c.Info.Started {
		t.Errorf("a second Up on a running cluster: %v, started %v (first %v)", err, again.Info.Started, c.Info.Started)
	}
	probe(t, c)
	ns := "default"
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, probePod("cycle", "serve"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "cycle", 3*time.Minute, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	t0 = time.Now()
	if err := Down(ctx, cfg, log); err != nil {
		t.Fatal(err)
	}
	t.Logf("down in %s", time.Since(t0).Round(10*time.Millisecond))
	if left := CheckClean(cfg); len(left) > 0 {
		t.Fatalf("left after down: %v", left)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
