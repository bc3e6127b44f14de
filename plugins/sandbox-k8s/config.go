package k8s

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agentenv/agentenv/sdk/config"
)

const configSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "namespace": {"type": "string", "description": "Namespace the env pods run in (default: the kubeconfig context's namespace; in a pod, the pod's own; else \"default\")."},
    "kubeconfig": {"type": "string", "description": "Path of a kubeconfig file (default: in-cluster config when agentenv runs in a pod, else $KUBECONFIG, else ~/.kube/config)."},
    "context": {"type": "string", "description": "kubeconfig context to use (default: its current-context)."},
    "in_cluster": {"type": "string", "enum": ["auto", "always", "never"], "description": "auto (default): the pod's service account when agentenv runs in a pod and neither kubeconfig nor context is set; always: only that; never: only a kubeconfig."},
    "default_cpu": {"type": "number", "exclusiveMinimum": 0, "description": "CPU limit (cores) of an env whose env.toml sets no cpu (default 0.5)."},
    "default_memory_mb": {"type": "integer", "minimum": 6, "description": "Memory limit (MiB) of an env whose env.toml sets no memory_mb (default 512)."},
    "cpu_request_fraction": {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "description": "CPU request as a fraction of the limit (default 1: requests equal limits, Guaranteed QoS)."},
    "memory_request_fraction": {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "description": "Memory request as a fraction of the limit (default 1)."},
    "tmp_mb": {"type": "integer", "minimum": 1, "description": "Size limit of the emptyDir mounted on /tmp (the root filesystem is read-only; default 64)."},
    "runtime_class": {"type": "string", "description": "RuntimeClass of the env pods, e.g. gvisor or kata (default: the cluster's default runtime)."},
    "node_selector": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Node labels the env pods must be placed on."},
    "spread_over": {"type": "string", "description": "Node label the env pods are spread evenly over, as a soft topology spread constraint (max skew 1, ScheduleAnyway): kubernetes.io/hostname (default) over nodes, topology.kubernetes.io/zone over zones; \"\" leaves placement to the scheduler alone."},
    "tolerations": {
      "type": "array",
      "description": "Tolerations of the env pods (as in a pod spec).",
      "items": {
        "type": "object",
        "additionalProperties": false,
        "properties": {
          "key": {"type": "string"},
          "operator": {"type": "string", "enum": ["Exists", "Equal"]},
          "value": {"type": "string"},
          "effect": {"type": "string", "enum": ["", "NoSchedule", "PreferNoSchedule", "NoExecute"]},
          "toleration_seconds": {"type": "integer", "minimum": 0}
        }
      }
    },
    "priority_class": {"type": "string", "description": "PriorityClass of the env pods."},
    "service_account": {"type": "string", "description": "Service account the env pods run as (default: the namespace's default)."},
    "automount_service_account_token": {"type": "boolean", "description": "Mount the service account's API token in env pods (default false: envs get no cluster credentials)."},
    "image_pull_secrets": {"type": "array", "items": {"type": "string"}, "description": "Secrets (in the namespace) the kubelet pulls env images with."},
    "image_pull_policy": {"type": "string", "enum": ["IfNotPresent", "Always", "Never"], "description": "Image pull policy of env containers (default IfNotPresent)."},
    "run_as_non_root": {"type": "boolean", "description": "Refuse to start an env whose image runs as root (default true for agentenv's own envs: the image must name a numeric non-root USER, or set run_as_user; default false for terminal envs, Harbor tasks' own images, which run as root)."},
    "run_as_user": {"type": "integer", "minimum": 0, "description": "UID env containers run as, instead of the image's USER."},
    "active_deadline": {"type": "string", "description": "Longest an env pod may run, as a Go duration (default 4h): the kubelet ends it then, even if no agentenv server is left to."},
    "termination_grace": {"type": "string", "description": "Time an env gets between SIGTERM and SIGKILL when it is terminated, as a Go duration (default 1s)."},
    "unschedulable_grace": {"type": "string", "description": "How long a pod the scheduler cannot place may wait before its deploy fails, as a Go duration (default 10s; raise it where a cluster autoscaler adds nodes)."},
    "network_policy": {"type": "boolean", "description": "Create a NetworkPolicy with each env pod: ingress to the env port only from the server, no egress unless allowed (default true)."},
    "server_pod_labels": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Labels of the agentenv server's pods, the only pods the policy lets in (default app.kubernetes.io/name=agentenv)."},
    "server_namespace": {"type": "string", "description": "Namespace of the agentenv server's pods (default: the pod's own when agentenv runs in a pod, else namespace)."},
    "server_cidrs": {"type": "array", "items": {"type": "string"}, "description": "Address ranges (CIDR) the policy also lets in: where agentenv runs outside the cluster (a node's address, a VPN range)."},
    "egress_cidrs": {"type": "array", "items": {"type": "string"}, "description": "Address ranges (CIDR) every env may connect to (default none: no egress); not for an env that asks for no internet."},
    "internet_cidrs": {"type": "array", "items": {"type": "string"}, "description": "Address ranges (CIDR) a terminal env (a Harbor task) that may use the internet may connect to (default [\"0.0.0.0/0\", \"::/0\"]: anywhere); an empty list gives them egress_cidrs only."},
    "image_registry": {"type": "string", "description": "Registry (and path) put before every env image named without a registry host, e.g. registry.example.com/agentenv: agentenv-harbor:<hash> (a Harbor task's built image) runs as registry.example.com/agentenv/agentenv-harbor:<hash>. envs.<env>.image is used as given."},
    "terminal_image": {"type": "string", "description": "Image holding the static agentenv-terminal binary at /agentenv-terminal (FROM scratch; docs/kubernetes.md), which an init container copies into a terminal env's pod (a Harbor task's). Needed to run Harbor tasks."},
    "storage_request_fraction": {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "description": "Ephemeral-storage request as a fraction of an env's storage limit (its storage_mb; default 0.1: the limit is a cap, not what a task is expected to fill)."},
    "env_secret": {"type": "boolean", "description": "Put the env's variables (env.toml's env table) in a Secret per pod instead of the pod spec (default true)."},
    "envs": {
      "type": "object",
      "description": "Per-env settings, by env name.",
      "additionalProperties": {
        "type": "object",
        "additionalProperties": false,
        "properties": {
          "image": {"type": "string", "description": "Image to run instead of env.toml's (e.g. its registry path)."},
          "cpu": {"type": "number", "exclusiveMinimum": 0, "description": "CPU limit (cores) instead of env.toml's cpu."},
          "memory_mb": {"type": "integer", "minimum": 6, "description": "Memory limit (MiB) instead of env.toml's memory_mb."},
          "egress_cidrs": {"type": "array", "items": {"type": "string"}, "description": "Address ranges this env may connect to, besides egress_cidrs (\"0.0.0.0/0\" for anywhere)."},
          "writable_root": {"type": "boolean", "description": "Give this env a writable root filesystem (default: false for agentenv's own envs, true for terminal envs)."},
          "run_as_user": {"type": "integer", "minimum": 0, "description": "UID this env runs as."},
          "run_as_non_root": {"type": "boolean", "description": "Overrides run_as_non_root for this env."}
        }
      }
    },
    "owner_references": {"type": "boolean", "description": "When agentenv runs in a pod (POD_NAME, POD_NAMESPACE and POD_UID set from the downward API) in the env namespace, make that pod the owner of every env pod, so the garbage collector deletes a dead server's envs (default true)."},
    "check_access": {"type": "boolean", "description": "At start, ask the API server whether the plugin may do everything it needs, and refuse to start naming what is missing (default true)."},
    "qps": {"type": "number", "exclusiveMinimum": 0, "description": "API requests per second the plugin may send (client-go's rate limiter; default 100)."},
    "burst": {"type": "integer", "minimum": 1, "description": "API requests allowed at once before qps applies (default 200)."},
    "pass_env": {"type": "array", "items": {"type": "string"}, "description": "More variables of the server's environment the plugin gets (KUBECONFIG and KUBERNETES_SERVICE_* always are under agentenv serve)."}
  }
}`

// Config is the plugin's configuration; its keys are the schema's.
type Config struct {
	Namespace                    string                 `json:"namespace"`
	Kubeconfig                   string                 `json:"kubeconfig"`
	Context                      string                 `json:"context"`
	InCluster                    string                 `json:"in_cluster"`
	DefaultCPU                   float64                `json:"default_cpu"`
	DefaultMemoryMB              int                    `json:"default_memory_mb"`
	CPURequestFraction           float64                `json:"cpu_request_fraction"`
	MemoryRequestFraction        float64                `json:"memory_request_fraction"`
	TmpMB                        int                    `json:"tmp_mb"`
	RuntimeClass                 string                 `json:"runtime_class"`
	NodeSelector                 map[string]string      `json:"node_selector"`
	SpreadOver                   string                 `json:"spread_over"`
	Tolerations                  []Toleration           `json:"tolerations"`
	PriorityClass                string                 `json:"priority_class"`
	ServiceAccount               string                 `json:"service_account"`
	AutomountServiceAccountToken bool                   `json:"automount_service_account_token"`
	ImagePullSecrets             []string               `json:"image_pull_secrets"`
	ImagePullPolicy              string                 `json:"image_pull_policy"`
	RunAsNonRoot                 *bool                  `json:"run_as_non_root"`
	RunAsUser                    *int64                 `json:"run_as_user"`
	ActiveDeadline               config.Duration        `json:"active_deadline"`
	TerminationGrace             config.Duration        `json:"termination_grace"`
	UnschedulableGrace           config.Duration        `json:"unschedulable_grace"`
	NetworkPolicy                bool                   `json:"network_policy"`
	ServerPodLabels              map[string]string      `json:"server_pod_labels"`
	ServerNamespace              string                 `json:"server_namespace"`
	ServerCIDRs                  []string               `json:"server_cidrs"`
	EgressCIDRs                  []string               `json:"egress_cidrs"`
	InternetCIDRs                []string               `json:"internet_cidrs"`
	TerminalImage                string                 `json:"terminal_image"`
	ImageRegistry                string                 `json:"image_registry"`
	StorageRequestFraction       float64                `json:"storage_request_fraction"`
	EnvSecret                    bool                   `json:"env_secret"`
	Envs                         map[string]EnvSettings `json:"envs"`
	OwnerReferences              bool                   `json:"owner_references"`
	CheckAccess                  bool                   `json:"check_access"`
	QPS                          float64                `json:"qps"`
	Burst                        int                    `json:"burst"`
	PassEnv                      []string               `json:"pass_env"`
}

// Toleration is one toleration of the env pods.
type Toleration struct {
	Key               string `json:"key"`
	Operator          string `json:"operator"`
	Value             string `json:"value"`
	Effect            string `json:"effect"`
	TolerationSeconds *int64 `json:"toleration_seconds"`
}

// EnvSettings are one env's own settings.
type EnvSettings struct {
	Image        string   `json:"image"`
	CPU          float64  `json:"cpu"`
	MemoryMB     int      `json:"memory_mb"`
	EgressCIDRs  []string `json:"egress_cidrs"`
	WritableRoot *bool    `json:"writable_root"`
	RunAsUser    *int64   `json:"run_as_user"`
	RunAsNonRoot *bool    `json:"run_as_non_root"`
}

// DefaultServerPodLabels select the server's pods of deploy/kubernetes.
var DefaultServerPodLabels = map[string]string{"app.kubernetes.io/name": "agentenv"}

// DefaultInternetCIDRs are where a terminal env with internet may connect:
// anywhere, as in Harbor's own Docker runs.
var DefaultInternetCIDRs = []string{"0.0.0.0/0", "::/0"}

// DefaultConfig is the configuration before Configure.
func DefaultConfig() Config {
	return Config{
		InCluster: "auto", DefaultCPU: 0.5, DefaultMemoryMB: 512,
		CPURequestFraction: 1, MemoryRequestFraction: 1, TmpMB: 64,
		StorageRequestFraction: 0.1,
		ImagePullPolicy:        "IfNotPresent",
		SpreadOver:             corev1.LabelHostname,
		ActiveDeadline:         config.Duration(4 * time.Hour),
		TerminationGrace:       config.Duration(time.Second),
		UnschedulableGrace:     config.Duration(10 * time.Second),
		NetworkPolicy:          true,
		OwnerReferences:        true,
		EnvSecret:              true, CheckAccess: true, QPS: 100, Burst: 200,
	}
}

// withDefaults fills in what JSON decoding cannot default: a map a user
// sets must replace the default, not merge into it.
func (c Config) withDefaults() Config {
	if c.ServerPodLabels == nil {
		c.ServerPodLabels = DefaultServerPodLabels
	}
	if c.InternetCIDRs == nil {
		c.InternetCIDRs = DefaultInternetCIDRs
	}
	return c
}

// check refuses what the API server would refuse later, naming the setting.
func (c Config) check() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("sandbox-k8s config: "+format, args...)
	}
	if c.Namespace != "" {
		if errs := validation.IsDNS1123Label(c.Namespace); len(errs) > 0 {
			return fail("namespace %q: %s", c.Namespace, strings.Join(errs, "; "))
		}
	}
	if c.ServerNamespace != "" {
		if errs := validation.IsDNS1123Label(c.ServerNamespace); len(errs) > 0 {
			return fail("server_namespace %q: %s", c.ServerNamespace, strings.Join(errs, "; "))
		}
	}
	if c.InCluster == "always" && (c.Kubeconfig != "" || c.Context != "") {
		return fail("in_cluster is always, so kubeconfig and context cannot be set too")
	}
	if c.DefaultCPU <= 0 || c.DefaultMemoryMB < 6 || c.TmpMB < 1 {
		return fail("default_cpu must be above 0, default_memory_mb at least 6 and tmp_mb at least 1")
	}
	if c.CPURequestFraction <= 0 || c.CPURequestFraction > 1 || c.MemoryRequestFraction <= 0 || c.MemoryRequestFraction > 1 ||
		c.StorageRequestFraction <= 0 || c.StorageRequestFraction > 1 {
		return fail("cpu_request_fraction, memory_request_fraction and storage_request_fraction must be above 0 and at most 1")
	}
	if time.Duration(c.ActiveDeadline) < time.Second {
		return fail("active_deadline %s: at least 1s (it is the pod's activeDeadlineSeconds)", time.Duration(c.ActiveDeadline))
	}
	if c.TerminationGrace < 0 || c.UnschedulableGrace < 0 {
		return fail("termination_grace and unschedulable_grace cannot be negative")
	}
	for k, v := range c.NodeSelector {
		if err := labelErr(k, v); err != nil {
			return fail("node_selector: %v", err)
		}
	}
	if c.SpreadOver != "" {
		if errs := validation.IsQualifiedName(c.SpreadOver); len(errs) > 0 {
			return fail("spread_over %q: not a node label name (%s); e.g. %s or %s, or \"\" for none",
				c.SpreadOver, strings.Join(errs, "; "), corev1.LabelHostname, corev1.LabelTopologyZone)
		}
	}
	if c.NetworkPolicy && len(c.ServerPodLabels) == 0 && len(c.ServerCIDRs) == 0 {
		return fail("network_policy is on but server_pod_labels and server_cidrs are both empty: no server could reach its envs")
	}
	for k, v := range c.ServerPodLabels {
		if err := labelErr(k, v); err != nil {
			return fail("server_pod_labels: %v", err)
		}
	}
	for _, list := range []struct {
		name  string
		cidrs []string
	}{{"server_cidrs", c.ServerCIDRs}, {"egress_cidrs", c.EgressCIDRs}, {"internet_cidrs", c.InternetCIDRs}} {
		if err := checkCIDRs(list.cidrs); err != nil {
			return fail("%s: %v", list.name, err)
		}
	}
	for name, e := range c.Envs {
		if err := checkCIDRs(e.EgressCIDRs); err != nil {
			return fail("envs.%s.egress_cidrs: %v", name, err)
		}
	}
	for i, t := range c.Tolerations {
		if t.Operator == "Exists" && t.Value != "" {
			return fail("tolerations[%d]: operator Exists takes no value", i)
		}
		if t.TolerationSeconds != nil && t.Effect != "NoExecute" {
			return fail("tolerations[%d]: toleration_seconds needs effect NoExecute", i)
		}
	}
	if c.TerminalImage != "" && strings.ContainsAny(c.TerminalImage, " \t\n") {
		return fail("terminal_image %q is not an image reference", c.TerminalImage)
	}
	if r := c.ImageRegistry; r != "" && (strings.ContainsAny(r, " \t\n@") || strings.Contains(r, "://") || strings.HasPrefix(r, "/")) {
		return fail("image_registry %q: want a registry host and optional path, such as registry.example.com/agentenv (no scheme, tag or spaces)", r)
	}
	for _, s := range append(append([]string{}, c.ImagePullSecrets...), c.ServiceAccount, c.PriorityClass, c.RuntimeClass) {
		if s == "" {
			continue
		}
		if errs := validation.IsDNS1123Subdomain(s); len(errs) > 0 {
			return fail("%q is not a Kubernetes object name (service_account, priority_class, runtime_class and image_pull_secrets name objects): %s", s, strings.Join(errs, "; "))
		}
	}
	if c.QPS <= 0 || c.Burst < 1 {
		return fail("qps must be above 0 and burst at least 1")
	}
	for _, name := range c.PassEnv {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return fail("pass_env entry %q is not a variable name", name)
		}
	}
	return nil
}

func labelErr(k, v string) error {
	if errs := validation.IsQualifiedName(k); len(errs) > 0 {
		return fmt.Errorf("label key %q: %s", k, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
		return fmt.Errorf("label %s=%q: %s", k, v, strings.Join(errs, "; "))
	}
	return nil
}

func checkCIDRs(cidrs []string) error {
	for _, s := range cidrs {
		if _, err := netip.ParsePrefix(s); err != nil {
			return fmt.Errorf("%q is not an address range such as 10.0.0.0/8: %v", s, err)
		}
	}
	return nil
}

// envSettings is env's own settings (none: the zero value).
func (c Config) envSettings(env string) EnvSettings { return c.Envs[env] }
