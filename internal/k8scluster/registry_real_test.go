package k8scluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/agentenv/agentenv/sdk/sdktest"
)

// uniqueProbe is a folder holding the probe (built by probe()) and a file
// of random bytes: its image's layer is one no node holds, so running it
// pulls every byte from the registry.
func uniqueProbe(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin, err := os.ReadFile(probeBuild.bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "probe"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nonce"), []byte(rand.String(32)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pushProbe pushes src as the probe's image to c's registry under a tag no
// node has seen, and returns its reference.
func pushProbe(t *testing.T, c *Cluster, src string) string {
	t.Helper()
	ref := fmt.Sprintf("%s/k8scluster-probe:%s", RegistryHost, rand.String(8))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.PushImage(ctx, src, ref, "/probe"); err != nil {
		t.Fatal(err)
	}
	return ref
}

// nodeHasImage reports whether a node's containerd stores ref.
func nodeHasImage(t *testing.T, n NodeInfo, ref string) bool {
	t.Helper()
	out, err := exec.Command("ctr", "-a", n.ContainerdSocket, "-n", "k8s.io", "images", "ls", "-q", "name=="+ref).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr images ls on %s: %v: %s", n.Name, err, out)
	}
	return strings.TrimSpace(string(out)) == ref
}

// An image pushed to the registry, and never imported, runs on each node:
// each node's containerd pulls it from the registry when a pod pinned
// there names it.
func TestClusterRegistryPullOnBothNodes(t *testing.T) {
	c := RequireCapability(t, CapNodes, CapRegistry)
	probe(t, c) // builds the probe
	ref := pushProbe(t, c, uniqueProbe(t))
	for _, n := range c.Info.Nodes {
		if nodeHasImage(t, n, ref) {
			t.Fatalf("%s already has %s before any pod named it", n.Name, ref)
		}
	}
	ns := c.Namespace(t, "k8scluster-registry")
	ctx := context.Background()
	for i, n := range c.Info.Nodes {
		name := fmt.Sprintf("pulled-%d", i+1)
		pod := onNode(probePod(name, "serve"), n.Name)
		pod.Spec.Containers[0].Image = ref
		pod.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := waitPod(t, c, ns, name, 2*time.Minute, "Running with an IP", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
		})
		httpOK(t, "http://"+net.JoinHostPort(p.Status.PodIP, "8080")+"/")
		if !nodeHasImage(t, n, ref) {
			t.Errorf("%s runs %s but its containerd does not list the image", n.Name, ref)
		}
		if got := p.Status.ContainerStatuses[0].ImageID; !strings.HasPrefix(got, RegistryHost+"/k8scluster-probe@sha256:") {
			t.Errorf("pod on %s: imageID %q, want the registry's %s/k8scluster-probe@sha256:...", n.Name, got, RegistryHost)
		}
		pulled := false
		evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			pulled = pulled || e.Reason == "Pulled" && strings.Contains(e.Message, "Successfully pulled image")
		}
		if !pulled {
			t.Errorf("pod on %s: no Pulled event saying the image was pulled: %+v", n.Name, evs.Items)
		}
	}
}

// A tag the registry does not have fails the pod with ErrImagePull (or
// the back-off that follows it), naming the image and saying it is not
// found, instead of leaving it Pending.
func TestClusterRegistryMissingTag(t *testing.T) {
	c := RequireCapability(t, CapRegistry)
	ref := RegistryHost + "/k8scluster-probe:never-pushed-" + rand.String(6)
	ns := c.Namespace(t, "k8scluster-regmiss")
	pod := probePod("missing", "serve")
	pod.Spec.Containers[0].Image = ref
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var w *corev1.ContainerStateWaiting
	waitPod(t, c, ns, "missing", 2*time.Minute, "failing to pull", func(p *corev1.Pod) bool {
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Waiting != nil && (s.State.Waiting.Reason == "ErrImagePull" || s.State.Waiting.Reason == "ImagePullBackOff") {
				w = s.State.Waiting
				return true
			}
		}
		return false
	})
	// The kubelet may report the back-off before a watcher sees
	// ErrImagePull; its Failed event keeps the pull's own error.
	msgs := []string{w.Reason + ": " + w.Message}
	evs, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=missing,reason=Failed"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		msgs = append(msgs, e.Message)
	}
	errImagePull, named := false, false
	for _, m := range msgs {
		errImagePull = errImagePull || strings.Contains(m, "ErrImagePull")
		named = named || strings.Contains(m, ref) && strings.Contains(m, "not found")
	}
	t.Logf("%s", strings.Join(msgs, " | "))
	if !errImagePull || !named {
		t.Errorf("the pod's status and Failed events do not say ErrImagePull, naming %s as not found: %s", ref, strings.Join(msgs, " | "))
	}
}

// The registry keeps what it is sent: a pushed image's manifest comes
// back by tag from the host, byte for byte, and pushing it again (its
// blobs already there) changes nothing.
func TestClusterRegistryServesPushed(t *testing.T) {
	c := RequireCapability(t, CapRegistry)
	probe(t, c)
	src := uniqueProbe(t)
	ref := pushProbe(t, c, src)
	repo, tag, err := RegistryRef(ref, c.Info.Registry)
	if err != nil {
		t.Fatal(err)
	}
	get := func() []byte {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+c.Info.Registry+"/v2/"+repo+"/manifests/"+tag, nil)
		req.Header.Set("Accept", mediaManifest)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("get the manifest of %s: %v", ref, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("get the manifest of %s: %s: %s", ref, resp.Status, b)
		}
		return b
	}
	first := get()
	var want bytes.Buffer
	if err := WriteOCI(&want, Image{Source: src, Ref: ref, Entrypoint: []string{"/probe"}}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(want.Bytes(), first) {
		t.Errorf("the registry's manifest of %s is not the one pushed:\n%s", ref, first)
	}
	if err := c.PushImage(context.Background(), src, ref, "/probe"); err != nil {
		t.Fatalf("push again: %v", err)
	}
	if again := get(); !bytes.Equal(first, again) {
		t.Errorf("pushing the same image again changed its manifest:\n%s\n%s", first, again)
	}
}

// A local Docker image reaches the nodes through the registry: `docker
// save` (whichever format the engine writes), pushed, pulled, run.
func TestClusterRegistryPushDocker(t *testing.T) {
	c := RequireCapability(t, CapRegistry)
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		sdktest.Missing(t, "a Docker engine", fmt.Sprintf("docker version: %v: %s", err, bytes.TrimSpace(out)), "run dockerd")
		return
	}
	probe(t, c)
	ctxDir := uniqueProbe(t)
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte("FROM scratch\nCOPY probe nonce /\nENTRYPOINT [\"/probe\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	image := "agentenv-k8scluster-probe:" + rand.String(8)
	if out, err := exec.Command("docker", "build", "-q", "-t", image, ctxDir).CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", image).Run() })
	ref := RegistryHost + "/k8scluster-probe-docker:" + rand.String(8)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.PushDocker(ctx, image, ref); err != nil {
		t.Fatal(err)
	}
	ns := c.Namespace(t, "k8scluster-regdocker")
	pod := probePod("from-docker", "serve")
	pod.Spec.Containers[0].Image = ref
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, c, ns, "from-docker", 2*time.Minute, "Running with an IP", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
	})
	httpOK(t, "http://"+net.JoinHostPort(p.Status.PodIP, "8080")+"/")
}

// An image imported by hand runs with IfNotPresent even when the kubelet
// once pulled the same content from the registry under another name: the
// kubelet must not re-pull it to check credentials (offline, that fails
// with ErrImagePull; see imagePullCredentialsVerificationPolicy).
func TestClusterRegistryImportedAfterPull(t *testing.T) {
	c := RequireCapability(t, CapNodes, CapRegistry)
	probe(t, c)
	src := uniqueProbe(t)
	pulled := pushProbe(t, c, src)
	node := c.Info.Nodes[0].Name
	ns := c.Namespace(t, "k8scluster-regimport")
	ctx := context.Background()
	imported := "agentenv.local/k8scluster-probe-imported:" + rand.String(8)
	for _, step := range []struct{ name, image string }{{"pulled", pulled}, {"imported", imported}} {
		if step.image == imported {
			c.Image(t, src, imported, "/probe")
		}
		pod := onNode(probePod(step.name, "serve"), node)
		pod.Spec.Containers[0].Image = step.image
		pod.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var waiting string
		p := waitPod(t, c, ns, step.name, 2*time.Minute, "Running or failing to pull", func(p *corev1.Pod) bool {
			for _, s := range p.Status.ContainerStatuses {
				if w := s.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
					waiting = w.Reason + ": " + w.Message
					return true
				}
			}
			return p.Status.Phase == corev1.PodRunning
		})
		if waiting != "" {
			t.Fatalf("%s image %s on %s: %s", step.name, step.image, node, waiting)
		}
		if p.Status.Phase != corev1.PodRunning {
			t.Fatalf("%s pod is %s", step.name, p.Status.Phase)
		}
	}
}
