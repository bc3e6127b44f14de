package main

// The Kubernetes sandbox: serve --sandbox k8s on the project's test cluster
// (internal/k8scluster, `make k8s-up`) or on the cluster a --k8s-config
// file names, and the floor, a bare pod of the env's image created through
// client-go, waited Running and ready, then MCP ready.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/envclient"
	"github.com/agentenv/agentenv/internal/k8scluster"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// k8sConfig is the k8s sandbox's settings file (--k8s-config); without
// one the test cluster is used, with a namespace of the run's own.
var k8sConfig string

// The pod requests the plugin is given here (a 2-core node runs C pods at
// once only if they request a sliver of their limits).
const k8sCPURequest, k8sMemoryRequest = 0.02, 0.25

// k8sTarget is the cluster and namespace the run's pods go to.
type k8sTarget struct {
	cluster *k8scluster.Cluster
	ns      string
}

var k8sRun k8sTarget

func k8sSetup(ctx context.Context, o options, dir string) (*setup, error) {
	env, err := firstEnv(o)
	if err != nil {
		return nil, err
	}
	s := &setup{envDef: env}
	if k8sConfig != "" {
		// The user's cluster: the floor needs its kubeconfig and namespace.
		var cfg struct {
			Kubeconfig string `json:"kubeconfig"`
			Namespace  string `json:"namespace"`
		}
		b, err := os.ReadFile(k8sConfig)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &cfg); err != nil || cfg.Kubeconfig == "" || cfg.Namespace == "" {
			return nil, fmt.Errorf("--k8s-config %s: the bare-pod floor needs a JSON file with kubeconfig and namespace (%v)", k8sConfig, err)
		}
		c, err := k8scluster.Open(cfg.Kubeconfig)
		if err != nil {
			return nil, err
		}
		k8sRun = k8sTarget{cluster: c, ns: cfg.Namespace}
		s.args = []string{"--sandbox", "k8s", "--sandbox-config", k8sConfig}
		return s, nil
	}
	c, err := k8scluster.Open(k8scluster.Locate())
	if err == nil {
		err = c.Ping(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("no Kubernetes test cluster (start one with `make k8s-up`, or give --k8s-config): %w", err)
	}
	if err := buildEnv(ctx, env); err != nil {
		return nil, err
	}
	// The env's image, FROM scratch, imported into the node's containerd
	// (as its Dockerfile builds it: the binary, listening on every interface).
	bin := envCommand(env)
	ictx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := c.ImportImage(ictx, bin, env.Image, "/"+filepath.Base(bin), "--host", "0.0.0.0"); err != nil {
		return nil, fmt.Errorf("importing %s: %w", env.Image, err)
	}
	ns := fmt.Sprintf("trainstep-%d", os.Getpid())
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create namespace %s: %w", ns, err)
	}
	s.closers = append(s.closers, func() {
		if err := c.DeleteNamespace(context.Background(), ns, 3*time.Minute); err != nil {
			fmt.Fprintln(os.Stderr, "trainstep:", err)
		}
	})
	if err := c.WaitServiceAccount(ctx, ns, "default", time.Minute); err != nil {
		s.close()
		return nil, err
	}
	k8sRun = k8sTarget{cluster: c, ns: ns}
	cfg, _ := json.Marshal(map[string]any{"kubeconfig": c.Info.Kubeconfig, "namespace": ns, "run_as_user": 65534,
		"cpu_request_fraction": k8sCPURequest, "memory_request_fraction": k8sMemoryRequest, "server_cidrs": []string{c.Info.HostIP + "/32"}})
	path := filepath.Join(dir, "k8s.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		s.close()
		return nil, err
	}
	s.args = []string{"--sandbox", "k8s", "--sandbox-config", path}
	return s, nil
}

// buildEnv runs the env's build command (the process sandbox's and the
// image's binary), so that no floor times a compile.
func buildEnv(ctx context.Context, env *bundle.Env) error {
	if len(env.Build) == 0 {
		return nil
	}
	b := exec.CommandContext(ctx, env.Build[0], env.Build[1:]...)
	b.Dir = env.Dir
	if out, err := b.CombinedOutput(); err != nil {
		return fmt.Errorf("building the env: %w\n%s", err, out)
	}
	return nil
}

// k8sFloor is a bare pod of the env's image, port and limits (no Secret,
// no NetworkPolicy, no scheduling gate), created through client-go and
// watched to Running and Ready, then MCP ready on its pod IP; deleted
// (and waited gone) outside the timing.
func k8sFloor(ctx context.Context, o options, s *setup) ([]time.Duration, []time.Duration, error) {
	c, ns, env := k8sRun.cluster, k8sRun.ns, s.envDef
	pods := c.Client.CoreV1().Pods(ns)
	uid := int64(65534)
	cpu, mem := resource.MustParse(fmt.Sprintf("%dm", int(env.CPU*1000))), resource.MustParse(fmt.Sprintf("%dMi", env.MemoryMB))
	cpuReq := resource.MustParse(fmt.Sprintf("%dm", max(1, int(env.CPU*1000*k8sCPURequest))))
	memReq := resource.MustParse(fmt.Sprintf("%dMi", max(1, int(float64(env.MemoryMB)*k8sMemoryRequest))))
	return floorRuns(ctx, o, func(ctx context.Context, i int) (time.Duration, *envclient.Client, func(), error) {
		name := fmt.Sprintf("trainstep-floor-%d", i)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"agentenv.bench": "trainstep"}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, SecurityContext: &corev1.PodSecurityContext{RunAsUser: &uid},
				Containers: []corev1.Container{{Name: "env", Image: env.Image, ImagePullPolicy: corev1.PullIfNotPresent,
					Env:   []corev1.EnvVar{{Name: sandbox.EnvPort, Value: strconv.Itoa(env.Port)}},
					Ports: []corev1.ContainerPort{{ContainerPort: int32(env.Port)}},
					Resources: corev1.ResourceRequirements{
						Limits:   corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem},
						Requests: corev1.ResourceList{corev1.ResourceCPU: cpuReq, corev1.ResourceMemory: memReq}}}}}}
		t := time.Now()
		created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return 0, nil, nil, fmt.Errorf("create pod %s/%s: %w", ns, name, err)
		}
		remove := func() { deletePod(c, ns, name) }
		ip, err := podReady(ctx, c, ns, name, created.ResourceVersion)
		if err != nil {
			return 0, nil, remove, err
		}
		mc, err := ready(ctx, "http://"+net.JoinHostPort(ip, strconv.Itoa(env.Port)))
		return time.Since(t), mc, remove, err
	})
}

// podReady watches pod name until it is Running with its Ready condition
// true, and returns its IP.
func podReady(ctx context.Context, c *k8scluster.Cluster, ns, name, rv string) (string, error) {
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: rv})
	if err != nil {
		return "", fmt.Errorf("watch pod %s/%s: %w", ns, name, err)
	}
	defer w.Stop()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return "", fmt.Errorf("the watch of pod %s/%s ended", ns, name)
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
				return "", fmt.Errorf("pod %s/%s ended: %s %s", ns, name, p.Status.Phase, p.Status.Message)
			}
			if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
				continue
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					return p.Status.PodIP, nil
				}
			}
		case <-ctx.Done():
			return "", fmt.Errorf("pod %s/%s not Running and ready: %w", ns, name, ctx.Err())
		}
	}
}

// deletePod deletes a floor pod at once and waits until it is gone, so its
// teardown does not compete with what is measured next.
func deletePod(c *k8scluster.Cluster, ns, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	zero := int64(0)
	pods := c.Client.CoreV1().Pods(ns)
	if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
		fmt.Fprintf(os.Stderr, "trainstep: delete pod %s/%s: %v\n", ns, name, err)
		return
	}
	for ctx.Err() == nil {
		if _, err := pods.Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "trainstep: pod %s/%s still there after 2 minutes\n", ns, name)
}
