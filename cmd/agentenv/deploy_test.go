package main

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// deploy/kubernetes as shipped works for a first user: the server's image
// is mapped to a pushed one (kustomize images:) and each env's image is
// named for the server (the env pods are the server's to make), the build
// context leaves out .git and bin/, and the probes do not kill a server
// that is preparing or draining (/health answers 503 then).
func TestDeployKubernetesAsShipped(t *testing.T) {
	var kust struct {
		Resources []string
		Images    []struct{ Name, NewName, NewTag string }
	}
	readYAML(t, "../../deploy/kubernetes/kustomization.yaml", &kust)
	if len(kust.Images) != 1 || kust.Images[0].Name != "agentenv" || kust.Images[0].NewName == "" {
		t.Errorf("kustomization.yaml images: %+v, want an entry mapping agentenv to a pushed image", kust.Images)
	}
	for _, r := range kust.Resources {
		if strings.Contains(r, "ingress") {
			t.Errorf("kustomization.yaml applies %s, an example to edit first", r)
		}
	}

	type probe struct {
		HTTPGet          struct{ Path string } `json:"httpGet"`
		FailureThreshold int                   `json:"failureThreshold"`
		PeriodSeconds    int                   `json:"periodSeconds"`
	}
	var dep struct {
		Metadata struct{ Namespace string }
		Spec     struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Image string
						Args  []string
						Env   []struct {
							Name      string
							ValueFrom *struct {
								FieldRef *struct{ FieldPath string } `json:"fieldRef"`
							} `json:"valueFrom"`
						}
						StartupProbe   *probe `json:"startupProbe"`
						ReadinessProbe *probe `json:"readinessProbe"`
						LivenessProbe  *probe `json:"livenessProbe"`
					}
				}
			}
		}
	}
	readYAML(t, "../../deploy/kubernetes/deployment.yaml", &dep)
	c := dep.Spec.Template.Spec.Containers[0]
	// Env pods are owned by the server's pod only in its own namespace,
	// which it knows from the downward API.
	fields := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			fields[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	for name, path := range map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace", "POD_UID": "metadata.uid"} {
		if fields[name] != path {
			t.Errorf("deployment.yaml: %s from %q, want the downward API's %s", name, fields[name], path)
		}
	}
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--sandbox-config=namespace=") && a != "--sandbox-config=namespace="+dep.Metadata.Namespace {
			t.Errorf("deployment.yaml: %s puts env pods outside the server's namespace %s, where its pod cannot own them", a, dep.Metadata.Namespace)
		}
	}
	var role struct{ Metadata struct{ Namespace string } }
	b, err := os.ReadFile("../../deploy/kubernetes/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(strings.Split(string(b), "\n---\n")[0]), &role); err != nil || role.Metadata.Namespace != dep.Metadata.Namespace {
		t.Errorf("rbac.yaml's Role is in namespace %q (%v), want the server's %s, where the env pods run", role.Metadata.Namespace, err, dep.Metadata.Namespace)
	}
	if c.Image != "agentenv" && !strings.HasPrefix(c.Image, "agentenv:") {
		t.Errorf("the container's image %q is not the one kustomize maps", c.Image)
	}
	envs := false
	for _, a := range c.Args {
		if strings.HasPrefix(a, `--sandbox-config=envs={"gridsim": {"image": "`) {
			envs = true
		}
	}
	if !envs {
		t.Errorf("deployment.yaml names no pushed image for GridSim's env: %q", c.Args)
	}
	switch {
	case c.StartupProbe == nil || c.StartupProbe.HTTPGet.Path != "/livez":
		t.Errorf("startup probe %+v, want /livez", c.StartupProbe)
	case c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/livez":
		t.Errorf("liveness probe %+v, want /livez (/health is 503 while preparing and draining)", c.LivenessProbe)
	case c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/health":
		t.Errorf("readiness probe %+v, want /health", c.ReadinessProbe)
	}

	var ing struct{ Kind string }
	readYAML(t, "../../deploy/kubernetes/ingress-example.yaml", &ing)
	if ing.Kind != "Ingress" {
		t.Errorf("ingress-example.yaml is a %q", ing.Kind)
	}

	ignore, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatalf("no .dockerignore at the build context's root: %v", err)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(string(ignore), "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, want := range []string{".git", "bin"} {
		if !lines[want] {
			t.Errorf(".dockerignore does not leave out %s", want)
		}
	}
	for _, kept := range []string{"cmd", "core", "examples", "go.mod", "go.sum", "*", "**"} {
		if lines[kept] {
			t.Errorf(".dockerignore leaves out %s, which the image's build needs", kept)
		}
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
