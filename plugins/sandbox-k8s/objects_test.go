package k8s

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

func TestConfigSchemaMatchesStruct(t *testing.T) {
	sdktest.ConfigSchemaMatches(t, New().Info().ConfigSchema, Config{})
	var schema struct {
		Properties map[string]struct {
			Items                struct{ Properties map[string]json.RawMessage } `json:"items"`
			AdditionalProperties struct{ Properties map[string]json.RawMessage } `json:"additionalProperties"`
		}
	}
	if err := json.Unmarshal([]byte(configSchema), &schema); err != nil {
		t.Fatal(err)
	}
	nested := func(props map[string]json.RawMessage) json.RawMessage {
		b, _ := json.Marshal(props)
		return []byte(`{"type":"object","additionalProperties":false,"properties":` + string(b) + `}`)
	}
	sdktest.ConfigSchemaMatches(t, nested(schema.Properties["tolerations"].Items.Properties), Toleration{})
	sdktest.ConfigSchemaMatches(t, nested(schema.Properties["envs"].AdditionalProperties.Properties), EnvSettings{})
}

func TestConfigureRefuses(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir()) // no ~/.kube/config
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	cases := []struct{ name, cfg, want string }{
		{"unknown key", `{"colour":"blue"}`, `unknown setting "colour"`},
		{"unknown env key", `{"envs":{"web":{"imag":"x"}}}`, `unknown field "imag"`},
		{"bad namespace", `{"namespace":"Agent_Envs"}`, `namespace "Agent_Envs"`},
		{"duration as number", `{"active_deadline":5}`, `"5s"`},
		{"deadline too short", `{"active_deadline":"10ms"}`, "active_deadline"},
		{"bad cidr", `{"server_cidrs":["10.0.0.0/33"]}`, "server_cidrs"},
		{"bad env cidr", `{"envs":{"web":{"egress_cidrs":["nowhere"]}}}`, "envs.web.egress_cidrs"},
		{"fraction", `{"cpu_request_fraction":1.5}`, "cpu_request_fraction"},
		{"no server peer", `{"server_pod_labels":{}}`, "no server could reach"},
		{"bad node selector", `{"node_selector":{"zone":"a b"}}`, "node_selector"},
		{"bad pull secret", `{"image_pull_secrets":["My Secret"]}`, "image_pull_secrets"},
		{"toleration", `{"tolerations":[{"key":"k","operator":"Exists","value":"v"}]}`, "tolerations[0]"},
		{"in cluster and kubeconfig", `{"in_cluster":"always","kubeconfig":"/x"}`, "in_cluster"},
		{"no cluster at all", `{}`, "no cluster configured"},
		{"missing kubeconfig file", `{"kubeconfig":"/no/such/kubeconfig"}`, "/no/such/kubeconfig"},
		{"in cluster outside a pod", `{"in_cluster":"always"}`, "in-cluster config"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := New().Configure(context.Background(), json.RawMessage(tc.cfg))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Configure(%s) = %v, want an error with %q", tc.cfg, err, tc.want)
			}
		})
	}
	if _, err := New().Deploy(context.Background(), sandbox.Spec{}); err == nil || !strings.Contains(err.Error(), "not configured") {
		t.Errorf("Deploy before Configure: %v", err)
	}
}

// A pod as the plugin builds it: locked down, labelled, its variables'
// values out of its spec, gated until its policy and Secret exist.
func TestBuildPod(t *testing.T) {
	cfg := DefaultConfig().withDefaults()
	cfg.CPURequestFraction = 0.5
	cfg.RuntimeClass = "gvisor"
	cfg.NodeSelector = map[string]string{"pool": "envs"}
	cfg.ImagePullSecrets = []string{"regcred"}
	cfg.Tolerations = []Toleration{{Key: "envs", Operator: "Exists", Effect: "NoSchedule"}}
	cfg.EgressCIDRs = []string{"10.1.0.0/16"}
	cfg.Envs = map[string]EnvSettings{"web": {Image: "registry.example/web:2", EgressCIDRs: []string{"0.0.0.0/0"}}}
	spec := sandbox.Spec{Env: "web", Image: "web:1", Port: 8080, CPU: 0.25, MemoryMB: 64,
		EnvVars: map[string]string{"API_KEY": "s3cret", "weird name": "v2", sandbox.EnvPort: "1"},
		Labels:  map[string]string{sandbox.LabelServer: "abc123", sandbox.LabelTask: "day/eval-001", sandbox.LabelCreated: "2026-12-02T02:00:00Z"}}
	o, err := build(cfg, "envs", "agentenv", spec, "k8s-0123")
	if err != nil {
		t.Fatal(err)
	}
	pod := o.pod
	c := pod.Spec.Containers[0]
	if c.Image != "registry.example/web:2" {
		t.Errorf("image %q: envs.web.image should win", c.Image)
	}
	sc := c.SecurityContext
	if *sc.AllowPrivilegeEscalation || *sc.Privileged || !*sc.ReadOnlyRootFilesystem || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("container security context not locked down: %+v", sc)
	}
	if ps := pod.Spec.SecurityContext; !*ps.RunAsNonRoot || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context: %+v", ps)
	}
	if *pod.Spec.AutomountServiceAccountToken || *pod.Spec.EnableServiceLinks || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pod spec: automount %v, service links %v, restart %s", *pod.Spec.AutomountServiceAccountToken, *pod.Spec.EnableServiceLinks, pod.Spec.RestartPolicy)
	}
	if *pod.Spec.ActiveDeadlineSeconds != 4*3600 || *pod.Spec.TerminationGracePeriodSeconds != 1 {
		t.Errorf("deadline %d, grace %d", *pod.Spec.ActiveDeadlineSeconds, *pod.Spec.TerminationGracePeriodSeconds)
	}
	if *pod.Spec.RuntimeClassName != "gvisor" || pod.Spec.NodeSelector["pool"] != "envs" || pod.Spec.ImagePullSecrets[0].Name != "regcred" || pod.Spec.Tolerations[0].Key != "envs" {
		t.Errorf("placement settings lost: %+v", pod.Spec)
	}
	lim, req := c.Resources.Limits, c.Resources.Requests
	if lim.Cpu().MilliValue() != 250 || req.Cpu().MilliValue() != 125 || lim.Memory().Value() != 64<<20 || req.Memory().Value() != 64<<20 {
		t.Errorf("resources: limits %v requests %v", lim, req)
	}
	if len(pod.Spec.SchedulingGates) != 1 || pod.Spec.SchedulingGates[0].Name != gateIsolation {
		t.Errorf("scheduling gates %+v", pod.Spec.SchedulingGates)
	}
	raw, _ := json.Marshal(pod)
	if strings.Contains(string(raw), "s3cret") {
		t.Errorf("the pod spec holds a variable's value: %s", raw)
	}
	got := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		got[e.Name] = e
	}
	if got[sandbox.EnvPort].Value != "8080" || got[sandbox.EnvSandboxID].Value != "k8s-0123" {
		t.Errorf("agentenv's variables: %+v", c.Env)
	}
	for name, key := range map[string]string{"API_KEY": "API_KEY", "weird name": "v1"} {
		ref := got[name].ValueFrom
		if ref == nil || ref.SecretKeyRef.Name != "k8s-0123" || ref.SecretKeyRef.Key != key || string(o.secret.Data[key]) != spec.EnvVars[name] {
			t.Errorf("variable %q: %+v (secret data %q)", name, got[name], o.secret.Data)
		}
	}
	if pod.Labels[sandbox.LabelServer] != "abc123" || pod.Labels[labelSandbox] != "k8s-0123" {
		t.Errorf("labels %v", pod.Labels)
	}
	if v := pod.Labels[sandbox.LabelTask]; v == "day/eval-001" || !strings.HasPrefix(v, "h-") {
		t.Errorf("task label %q: a value Kubernetes refuses must be a digest", v)
	}
	if back := labelsOf(pod.ObjectMeta); back[sandbox.LabelTask] != "day/eval-001" || back[sandbox.LabelCreated] != spec.Labels[sandbox.LabelCreated] {
		t.Errorf("labels read back %v", back)
	}
	// The policy: this pod only; in from the server's pods on the env port;
	// out to the allowed ranges only.
	np := o.policy.Spec
	if np.PodSelector.MatchLabels[labelSandbox] != "k8s-0123" || len(np.PolicyTypes) != 2 {
		t.Errorf("policy selects %v, types %v", np.PodSelector, np.PolicyTypes)
	}
	in := np.Ingress[0]
	if in.Ports[0].Port.IntValue() != 8080 || in.From[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "agentenv" ||
		in.From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "agentenv" {
		t.Errorf("ingress %+v", in)
	}
	if len(np.Egress) != 1 || len(np.Egress[0].To) != 2 || np.Egress[0].To[1].IPBlock.CIDR != "0.0.0.0/0" {
		t.Errorf("egress %+v", np.Egress)
	}
}

func TestBuildPlain(t *testing.T) {
	cfg := DefaultConfig().withDefaults()
	cfg.NetworkPolicy = false
	spec := sandbox.Spec{Env: "e", Image: "e:1", Port: 80}
	o, err := build(cfg, "ns", "ns", spec, "k8s-1")
	if err != nil {
		t.Fatal(err)
	}
	if o.policy != nil || o.secret != nil || len(o.pod.Spec.SchedulingGates) != 0 {
		t.Errorf("no policy, no variables: want a plain ungated pod, got policy %v secret %v gates %v", o.policy, o.secret, o.pod.Spec.SchedulingGates)
	}
	c := o.pod.Spec.Containers[0]
	if !c.Resources.Limits.Cpu().Equal(resource.MustParse("500m")) || !c.Resources.Limits.Memory().Equal(resource.MustParse("512Mi")) {
		t.Errorf("defaults: %v", c.Resources.Limits)
	}
	for _, bad := range []sandbox.Spec{{Env: "e", Port: 80}, {Env: "e", Image: "x", Port: 0}} {
		if _, err := build(cfg, "ns", "ns", bad, "k8s-1"); err == nil {
			t.Errorf("build(%+v) accepted", bad)
		}
	}
}

func TestPodFailure(t *testing.T) {
	waiting := func(reason, msg string) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "env", Image: "nope:1",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}}
	}
	cases := []struct {
		name   string
		status corev1.PodStatus
		want   string // "" = no failure yet
	}{
		{"pending", corev1.PodStatus{Phase: corev1.PodPending}, ""},
		{"creating", waiting("ContainerCreating", ""), ""},
		{"pull", waiting("ErrImagePull", "not found"), "image nope:1 cannot be pulled: ErrImagePull: not found"},
		{"backoff", waiting("ImagePullBackOff", "Back-off"), "ImagePullBackOff"},
		{"root", waiting("CreateContainerConfigError", "container has runAsNonRoot and image will run as root"), "numeric non-root USER"},
		{"oom", corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "env",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}},
			"exited with code 137 (OOMKilled): it used more than its memory limit 64Mi"},
		{"evicted", corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory"}, "Evicted: low on memory"},
		{"crash", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "env",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: "listen: bad port"}}}}},
			"exited with code 2 (Error); its output ends:\nlisten: bad port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Status: tc.status, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "env",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}}}}
			err := podFailure(pod)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("failure %v, want none yet", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("failure %v, want %q", err, tc.want)
			}
		})
	}
}

func TestLabelValue(t *testing.T) {
	for _, v := range []string{"abc", "0123abcd", "a.b-c_d", ""} {
		if got := labelValue(v); got != v {
			t.Errorf("labelValue(%q) = %q, want it kept", v, got)
		}
	}
	for _, v := range []string{"day/eval-001", "2026-12-02T02:00:00Z", strings.Repeat("x", 64), "-lead"} {
		got := labelValue(v)
		if got == v || !strings.HasPrefix(got, "h-") || len(got) > 63 || got != labelValue(v) {
			t.Errorf("labelValue(%q) = %q", v, got)
		}
	}
}
