package k8s

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

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
		{"storage fraction", `{"storage_request_fraction":0}`, "storage_request_fraction"},
		{"bad internet cidr", `{"internet_cidrs":["anywhere"]}`, "internet_cidrs"},
		{"bad terminal image", `{"terminal_image":"my image"}`, "terminal_image"},
		{"registry with a scheme", `{"image_registry":"https://registry.example.com"}`, "image_registry"},
		{"no server peer", `{"server_pod_labels":{}}`, "no server could reach"},
		{"bad node selector", `{"node_selector":{"zone":"a b"}}`, "node_selector"},
		{"bad spread label", `{"spread_over":"the nodes"}`, `spread_over "the nodes"`},
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

// Env pods spread over nodes by default, softly, counting every env pod
// of the namespace; spread_over names another label, or "" none.
func TestBuildSpread(t *testing.T) {
	spec := sandbox.Spec{Env: "e", Image: "e:1", Port: 80}
	for _, tc := range []struct{ spreadOver, wantKey string }{
		{DefaultConfig().SpreadOver, "kubernetes.io/hostname"},
		{"topology.kubernetes.io/zone", "topology.kubernetes.io/zone"},
		{"", ""},
	} {
		cfg := DefaultConfig().withDefaults()
		cfg.SpreadOver = tc.spreadOver
		o, err := build(cfg, "ns", "ns", spec, "k8s-1")
		if err != nil {
			t.Fatal(err)
		}
		tsc := o.pod.Spec.TopologySpreadConstraints
		if tc.wantKey == "" {
			if len(tsc) != 0 {
				t.Errorf("spread_over %q: constraints %+v, want none", tc.spreadOver, tsc)
			}
			continue
		}
		if len(tsc) != 1 || tsc[0].TopologyKey != tc.wantKey || tsc[0].MaxSkew != 1 || tsc[0].WhenUnsatisfiable != corev1.ScheduleAnyway {
			t.Fatalf("spread_over %q: constraints %+v, want one soft constraint over %s", tc.spreadOver, tsc, tc.wantKey)
		}
		sel, err := metav1.LabelSelectorAsSelector(tsc[0].LabelSelector)
		if err != nil || !sel.Matches(labels.Set(o.pod.Labels)) || sel.Matches(labels.Set{"app.kubernetes.io/name": "agentenv"}) {
			t.Errorf("spread selector %v (%v): want every env pod, not the server's", sel, err)
		}
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
		{"terminal image missing", corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{Name: terminalInit, Image: "terminal:1",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "not present"}}}}},
			"image terminal:1 cannot be pulled: ErrImageNeverPull: not present; check the image name and tag, that the node can reach its registry, and image_pull_secrets for a private one (this container copies agentenv's terminal into the pod: terminal_image must hold"},
		{"terminal install failed", corev1.PodStatus{Phase: corev1.PodFailed, InitContainerStatuses: []corev1.ContainerStatus{{Name: terminalInit,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: "unknown command install"}}}}},
			"container agentenv-terminal-install exited with code 2 (Error); its output ends:\nunknown command install (this container copies agentenv's terminal"},
		{"terminal installed", corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{Name: terminalInit,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "env", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}}, ""},
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

// A terminal env's pod (a Harbor task): the task's image run unchanged
// with agentenv's terminal copied in by an init container, as Docker runs
// it (its user, a writable root, the runtime's capabilities), its storage
// capped, and egress anywhere unless it asks for no internet.
func TestBuildTerminalPod(t *testing.T) {
	base := func() Config {
		cfg := DefaultConfig().withDefaults()
		cfg.TerminalImage = "registry.example/agentenv-terminal:1"
		cfg.EgressCIDRs = []string{"10.1.0.0/16"}
		cfg.Envs = map[string]EnvSettings{"own": {EgressCIDRs: []string{"10.9.0.0/16"}}}
		return cfg
	}
	spec := func(env, workdir string, noInternet bool) sandbox.Spec {
		return sandbox.Spec{Env: env, Image: "agentenv-harbor:0123456789ab", Port: 18765, CPU: 1, MemoryMB: 1024, StorageMB: 2048,
			EnvVars:  map[string]string{envWorkdir: "/elsewhere", "TASK_VAR": "x"},
			Terminal: &sandbox.Terminal{Workdir: workdir}, NoInternet: noInternet}
	}
	type want struct {
		workdir  string // "" = none set: the image's WORKDIR
		egress   []string
		drop     []corev1.Capability
		readOnly bool
		nonRoot  bool
		runAs    *int64
		tmp      bool // an emptyDir on /tmp
	}
	uid := int64(1000)
	yes, no := true, false
	cases := []struct {
		name string
		cfg  func(Config) Config
		spec sandbox.Spec
		want want
	}{
		{"internet", func(c Config) Config { return c }, spec("task", "/app", false),
			want{workdir: "/app", egress: []string{"10.1.0.0/16", "0.0.0.0/0", "::/0"}}},
		{"no internet", func(c Config) Config { return c }, spec("task", "/app/", true),
			want{workdir: "/app", drop: []corev1.Capability{"NET_RAW"}}},
		{"no internet keeps the env's own egress", func(c Config) Config { return c }, spec("own", "", true),
			want{egress: []string{"10.9.0.0/16"}, drop: []corev1.Capability{"NET_RAW"}}},
		{"internet_cidrs narrowed", func(c Config) Config { c.InternetCIDRs = []string{"203.0.113.0/24"}; return c }, spec("task", "", false),
			want{egress: []string{"10.1.0.0/16", "203.0.113.0/24"}}},
		{"explicit settings win", func(c Config) Config {
			c.RunAsNonRoot = &yes
			c.RunAsUser = &uid
			c.Envs = map[string]EnvSettings{"task": {WritableRoot: &no}}
			return c
		}, spec("task", "", false),
			want{egress: []string{"10.1.0.0/16", "0.0.0.0/0", "::/0"}, readOnly: true, nonRoot: true, runAs: &uid, tmp: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, err := build(tc.cfg(base()), "envs", "agentenv", tc.spec, "k8s-0123")
			if err != nil {
				t.Fatal(err)
			}
			pod, w := o.pod, tc.want
			if len(pod.Spec.InitContainers) != 1 || len(pod.Spec.Containers) != 1 {
				t.Fatalf("containers: %d init, %d", len(pod.Spec.InitContainers), len(pod.Spec.Containers))
			}
			ic, c := pod.Spec.InitContainers[0], pod.Spec.Containers[0]
			if ic.Image != "registry.example/agentenv-terminal:1" || strings.Join(ic.Command, " ") != "/agentenv-terminal install /.agentenv/agentenv-terminal" {
				t.Errorf("init container runs %s %v", ic.Image, ic.Command)
			}
			if len(ic.VolumeMounts) != 1 || ic.VolumeMounts[0].MountPath != "/.agentenv" || ic.VolumeMounts[0].ReadOnly {
				t.Errorf("init container mounts %+v: want the binary's volume writable at /.agentenv", ic.VolumeMounts)
			}
			if isc := ic.SecurityContext; !*isc.ReadOnlyRootFilesystem || *isc.AllowPrivilegeEscalation || len(isc.Capabilities.Drop) != 1 {
				t.Errorf("init container not locked down: %+v", isc)
			}
			if !equality.Semantic.DeepEqual(ic.Resources, c.Resources) {
				t.Errorf("init container resources %v, env's %v: the init container must not ask for more", ic.Resources, c.Resources)
			}
			if c.Image != "agentenv-harbor:0123456789ab" || strings.Join(c.Command, " ") != "/.agentenv/agentenv-terminal" || c.Args != nil {
				t.Errorf("env container runs %s %v %v: want the task's image running the injected terminal", c.Image, c.Command, c.Args)
			}
			mounts := map[string]corev1.VolumeMount{}
			for _, m := range c.VolumeMounts {
				mounts[m.MountPath] = m
			}
			if m, ok := mounts["/.agentenv"]; !ok || !m.ReadOnly {
				t.Errorf("env container mounts %+v: want the terminal read-only at /.agentenv", c.VolumeMounts)
			}
			if _, ok := mounts["/tmp"]; ok != w.tmp {
				t.Errorf("an emptyDir on /tmp: %v, want %v", ok, w.tmp)
			}
			vars := map[string][]string{}
			for _, e := range c.Env {
				vars[e.Name] = append(vars[e.Name], e.Value)
			}
			if c.WorkingDir != w.workdir {
				t.Errorf("working dir %q, want %q", c.WorkingDir, w.workdir)
			}
			wantWD := []string(nil)
			if w.workdir != "" {
				wantWD = []string{w.workdir}
			}
			if strings.Join(vars[envWorkdir], ",") != strings.Join(wantWD, ",") || vars[sandbox.EnvPort][0] != "18765" || len(vars["TASK_VAR"]) != 1 {
				t.Errorf("variables %v: want %s=%v (agentenv's, not the env's), the port and the task's own", vars, envWorkdir, wantWD)
			}
			sc, ps := c.SecurityContext, pod.Spec.SecurityContext
			if *sc.ReadOnlyRootFilesystem != w.readOnly || *ps.RunAsNonRoot != w.nonRoot || !equality.Semantic.DeepEqual(ps.RunAsUser, w.runAs) {
				t.Errorf("read-only root %v, runAsNonRoot %v, runAsUser %v; want %v, %v, %v", *sc.ReadOnlyRootFilesystem, *ps.RunAsNonRoot, ps.RunAsUser, w.readOnly, w.nonRoot, w.runAs)
			}
			if *sc.AllowPrivilegeEscalation || *sc.Privileged || !equality.Semantic.DeepEqual(sc.Capabilities.Drop, w.drop) {
				t.Errorf("capabilities dropped %v (want %v), escalation %v, privileged %v", sc.Capabilities.Drop, w.drop, *sc.AllowPrivilegeEscalation, *sc.Privileged)
			}
			lim, req := c.Resources.Limits, c.Resources.Requests
			if !lim.StorageEphemeral().Equal(resource.MustParse("2Gi")) || req.StorageEphemeral().Value() != int64(math.Ceil(0.1*float64(2048<<20))) {
				t.Errorf("ephemeral storage: limit %v request %v, want 2Gi and a tenth", lim.StorageEphemeral(), req.StorageEphemeral())
			}
			var egress []string
			for _, r := range o.policy.Spec.Egress {
				for _, to := range r.To {
					egress = append(egress, to.IPBlock.CIDR)
				}
			}
			if strings.Join(egress, " ") != strings.Join(w.egress, " ") {
				t.Errorf("egress to %v, want %v", egress, w.egress)
			}
		})
	}
}

func TestBuildTerminalRefuses(t *testing.T) {
	cfg := DefaultConfig().withDefaults()
	spec := sandbox.Spec{Env: "task", Image: "task:1", Port: 18765, Terminal: &sandbox.Terminal{}}
	_, err := build(cfg, "ns", "ns", spec, "k8s-1")
	for _, want := range []string{"terminal_image is not set", "make build", "FROM scratch", "COPY agentenv-terminal /agentenv-terminal", "docs/kubernetes.md"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a terminal env without terminal_image: %v, want an error with %q", err, want)
		}
	}
	cfg.TerminalImage = "terminal:1"
	spec.Terminal.Workdir = "app"
	if _, err := build(cfg, "ns", "ns", spec, "k8s-1"); err == nil || !strings.Contains(err.Error(), `workdir "app" is not an absolute path`) {
		t.Errorf("a relative workdir: %v", err)
	}
	// An env of agentenv's own keeps its defaults whatever terminal_image is.
	o, err := build(cfg, "ns", "ns", sandbox.Spec{Env: "e", Image: "e:1", Port: 80, StorageMB: 0}, "k8s-1")
	if err != nil {
		t.Fatal(err)
	}
	c := o.pod.Spec.Containers[0]
	if len(o.pod.Spec.InitContainers) != 0 || c.Command != nil || !*c.SecurityContext.ReadOnlyRootFilesystem || !*o.pod.Spec.SecurityContext.RunAsNonRoot {
		t.Errorf("a plain env changed: %+v", o.pod.Spec)
	}
	if _, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
		t.Errorf("no storage_mb, yet an ephemeral-storage limit: %v", c.Resources.Limits)
	}
}

func TestWithRegistry(t *testing.T) {
	for _, tc := range []struct{ registry, image, want string }{
		{"", "agentenv-harbor:0123", "agentenv-harbor:0123"},
		{"registry.example.com/agentenv/", "agentenv-harbor:0123", "registry.example.com/agentenv/agentenv-harbor:0123"},
		{"registry.example.com", "python:3.12", "registry.example.com/python:3.12"},
		{"registry.example.com", "library/python:3.12", "registry.example.com/library/python:3.12"},
		{"registry.example.com", "ghcr.io/org/task:1", "ghcr.io/org/task:1"},
		{"registry.example.com", "localhost/task:1", "localhost/task:1"},
		{"registry.example.com", "host:5000/task:1", "host:5000/task:1"},
	} {
		if got := withRegistry(tc.registry, tc.image); got != tc.want {
			t.Errorf("withRegistry(%q, %q) = %q, want %q", tc.registry, tc.image, got, tc.want)
		}
	}
	cfg := DefaultConfig().withDefaults()
	cfg.ImageRegistry = "registry.example.com/agentenv"
	cfg.Envs = map[string]EnvSettings{"mapped": {Image: "elsewhere/own:1"}}
	for env, want := range map[string]string{"task": "registry.example.com/agentenv/agentenv-harbor:0123", "mapped": "elsewhere/own:1"} {
		o, err := build(cfg, "ns", "ns", sandbox.Spec{Env: env, Image: "agentenv-harbor:0123", Port: 80}, "k8s-1")
		if err != nil {
			t.Fatal(err)
		}
		if got := o.pod.Spec.Containers[0].Image; got != want {
			t.Errorf("env %s runs %s, want %s", env, got, want)
		}
	}
}

func TestOwnerOf(t *testing.T) {
	inPod := map[string]string{EnvPodName: "agentenv-abc", EnvPodNamespace: "agentenv", EnvPodUID: "uid-1"}
	off := DefaultConfig()
	off.OwnerReferences = false
	for _, tc := range []struct {
		name    string
		cfg     Config
		envNS   string
		env     map[string]string
		owner   bool
		why     string // part of the reason there is none
		errPart string
	}{
		{"in a pod, same namespace", DefaultConfig(), "agentenv", inPod, true, "", ""},
		{"outside a pod", DefaultConfig(), "agentenv", nil, false, "", ""},
		{"half the variables", DefaultConfig(), "agentenv", map[string]string{EnvPodName: "x", EnvPodNamespace: "agentenv"}, false, "", ""},
		{"another namespace", DefaultConfig(), "agentenv-envs", inPod, false, "no owners across namespaces", ""},
		{"switched off", off, "agentenv", inPod, false, "owner_references is off", ""},
		{"bad pod name", DefaultConfig(), "agentenv", map[string]string{EnvPodName: "Not_A_Pod", EnvPodNamespace: "agentenv", EnvPodUID: "u"}, false, "", "POD_NAME"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, why, err := ownerOf(tc.cfg, tc.envNS, func(k string) string { return tc.env[k] })
			if tc.errPart != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errPart) {
					t.Fatalf("err %v, want one naming %s", err, tc.errPart)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (o != nil) != tc.owner || !strings.Contains(why, tc.why) || (tc.why == "") != (why == "") {
				t.Fatalf("owner %+v, why %q; want owner %v, why containing %q", o, why, tc.owner, tc.why)
			}
			if o != nil && (o.Kind != "Pod" || o.APIVersion != "v1" || o.Name != "agentenv-abc" || o.UID != "uid-1") {
				t.Fatalf("owner %+v", o)
			}
		})
	}
}
