package k8scluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/agentenv/agentenv/sdk/sdktest"
)

// howToStart is what a developer runs to get a cluster for the tests.
const howToStart = "start one with `make k8s-up` (root; see docs/k8s-test-cluster.md) or point " + EnvKubeconfig + " at a kubeconfig"

// Locate says where the tests' cluster is: EnvKubeconfig when set, else the
// state folder (EnvState, default DefaultStateDir).
func Locate() string {
	if kc := os.Getenv(EnvKubeconfig); kc != "" {
		return kc
	}
	if d := os.Getenv(EnvState); d != "" {
		return d
	}
	return DefaultStateDir
}

// Require returns the running test cluster (see Locate). Without one the
// test is skipped, loudly, except under CI=true, where it fails: .ci/run
// brings the cluster up before the tests.
func Require(t testing.TB) *Cluster {
	t.Helper()
	c, err := find(context.Background())
	if err != nil {
		unavailable(t, err)
		return nil
	}
	return c
}

// RequireCapability is Require for a test that needs what the cluster
// records it offers (CapNodes, CapServices, CapNetworkPolicy): a cluster without it skips
// the test, or fails it under CI=true, naming what is missing.
func RequireCapability(t testing.TB, caps ...string) *Cluster {
	t.Helper()
	c := Require(t)
	if c == nil {
		return nil
	}
	for _, cp := range caps {
		if !c.Info.Has(cp) {
			sdktest.Missing(t, "a test cluster with "+cp, fmt.Sprintf("the cluster at %s records capabilities %v", c.Info.StateDir, c.Info.Capabilities),
				"bring it up with this checkout's `k8scluster up` (docs/k8s-test-cluster.md)")
			return nil
		}
	}
	return c
}

func find(ctx context.Context) (*Cluster, error) {
	where := Locate()
	c, err := Open(where)
	if err != nil {
		return nil, err
	}
	if err := c.Ping(ctx); err != nil {
		return nil, fmt.Errorf("cluster at %s does not answer: %w", where, err)
	}
	return c, nil
}

// unavailable skips t loudly, or fails it under CI=true (.ci/run starts
// the cluster).
func unavailable(t testing.TB, err error) {
	t.Helper()
	sdktest.Missing(t, "the Kubernetes test cluster", err.Error(), howToStart)
}

// Namespace creates a namespace named prefix-<random> for the test and
// deletes it (and waits for it to be gone, pods included) when the test
// ends, so the next test starts from nothing.
func (c *Cluster) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	ctx := context.Background()
	name := strings.ToLower(prefix) + "-" + rand.String(5)
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := c.DeleteNamespace(context.Background(), name, 2*time.Minute); err != nil {
			t.Errorf("test namespace: %v", err)
		}
	})
	// Pods need the namespace's default ServiceAccount; the controller
	// manager makes it a moment after the namespace.
	if err := c.WaitServiceAccount(ctx, name, "default", time.Minute); err != nil {
		t.Fatal(err)
	}
	return name
}

// DeleteNamespace deletes ns with its pods at once (grace 0) and waits
// until the apiserver has removed it.
func (c *Cluster) DeleteNamespace(ctx context.Context, ns string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	zero := int64(0)
	_ = c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	if err := c.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	w, err := c.Client.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + ns})
	if err != nil {
		return fmt.Errorf("watch namespace %s: %w", ns, err)
	}
	defer w.Stop()
	if _, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return nil
	}
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				if _, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("namespace %s: watch closed before it was deleted", ns)
			}
			if ev.Type == "DELETED" {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("namespace %s still there after %s: %w", ns, timeout, ctx.Err())
		}
	}
}

// WaitServiceAccount waits until ns has the ServiceAccount sa.
func (c *Cluster) WaitServiceAccount(ctx context.Context, ns, sa string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w, err := c.Client.CoreV1().ServiceAccounts(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + sa})
	if err != nil {
		return fmt.Errorf("watch service account %s/%s: %w", ns, sa, err)
	}
	defer w.Stop()
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, sa, metav1.GetOptions{}); err == nil {
		return nil
	}
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("service account %s/%s: watch closed", ns, sa)
			}
			if ev.Type == "ADDED" {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("service account %s/%s did not appear in %s", ns, sa, timeout)
		}
	}
}

// KubeconfigFile writes KubeconfigFor(user, groups...) into the test's
// temp folder and returns its path.
func (c *Cluster) KubeconfigFile(t testing.TB, user string, groups ...string) string {
	t.Helper()
	b, err := c.KubeconfigFor(user, groups...)
	if err != nil {
		t.Fatalf("kubeconfig for %s: %v", user, err)
	}
	p := filepath.Join(t.TempDir(), "kubeconfig-"+user)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Image imports a FROM-scratch image of src (see ImportImage), failing the
// test when it cannot.
func (c *Cluster) Image(t testing.TB, src, ref string, entrypoint ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.ImportImage(ctx, src, ref, entrypoint...); err != nil {
		t.Fatal(err)
	}
}
