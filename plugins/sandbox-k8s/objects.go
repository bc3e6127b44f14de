package k8s

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

const (
	// labelSandbox marks every object the plugin creates with its sandbox
	// id; pods without it are not agentenv's and List leaves them alone.
	labelSandbox = "agentenv.sandbox"
	// annotationLabels holds the deploy's labels exactly (label values
	// cannot hold every value: a task id has a '/', a time a ':').
	annotationLabels = "agentenv.io/labels"
	// gateIsolation holds a pod back from the scheduler until its
	// NetworkPolicy and Secret exist (they are owned by the pod, so they
	// go with it, however it goes).
	gateIsolation = "agentenv.io/isolation"
	// containerName is the env's container.
	containerName = "env"
	// managedBy is app.kubernetes.io/managed-by of every object.
	managedBy = "agentenv"
)

// labelValue is a label's value as a Kubernetes label holds it: the value
// itself when it is a valid label value, else a digest of it (List filters
// on the same digest, then on the exact value in the annotation).
func labelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "h-" + hex.EncodeToString(sum[:20])
}

// selectable reports whether a label key can be a Kubernetes label key.
func selectable(k string) bool {
	return len(validation.IsQualifiedName(k)) == 0 && k != labelSandbox
}

// objectLabels are the Kubernetes labels of a sandbox's objects.
func objectLabels(labels map[string]string, id string) map[string]string {
	out := map[string]string{labelSandbox: id, "app.kubernetes.io/managed-by": managedBy}
	for k, v := range labels {
		if selectable(k) {
			out[k] = labelValue(v)
		}
	}
	return out
}

// annotations hold the deploy's labels exactly.
func annotations(labels map[string]string) map[string]string {
	b, _ := json.Marshal(labels)
	return map[string]string{annotationLabels: string(b)}
}

// labelsOf reads a sandbox's labels back from an object.
func labelsOf(meta metav1.ObjectMeta) map[string]string {
	out := map[string]string{}
	if s, ok := meta.Annotations[annotationLabels]; ok && json.Unmarshal([]byte(s), &out) == nil {
		return out
	}
	for k, v := range meta.Labels { // not written by this plugin: the labels as they are
		if k != labelSandbox {
			out[k] = v
		}
	}
	return out
}

// secretKeyRE is what a Secret's data keys may hold.
var secretKeyRE = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// envVars are the container's variables: agentenv's in the spec, and the
// env's own either in the spec or (env_secret) drawn from the pod's Secret.
// The second result is the Secret's data (nil: no Secret).
func envVars(spec sandbox.Spec, id, secretName string, inSecret bool) ([]corev1.EnvVar, map[string][]byte) {
	keys := make([]string, 0, len(spec.EnvVars))
	for k := range spec.EnvVars {
		if k != sandbox.EnvPort && k != sandbox.EnvSandboxID && (spec.Terminal == nil || k != envWorkdir) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var env []corev1.EnvVar
	var data map[string][]byte
	for i, k := range keys {
		if !inSecret {
			env = append(env, corev1.EnvVar{Name: k, Value: spec.EnvVars[k]})
			continue
		}
		if data == nil {
			data = map[string][]byte{}
		}
		key := k
		if !secretKeyRE.MatchString(k) {
			key = "v" + strconv.Itoa(i)
		}
		data[key] = []byte(spec.EnvVars[k])
		env = append(env, corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secretName}, Key: key},
		}})
	}
	return append(env,
		corev1.EnvVar{Name: sandbox.EnvPort, Value: strconv.Itoa(spec.Port)},
		corev1.EnvVar{Name: sandbox.EnvSandboxID, Value: id},
	), data
}

// resources are the env's CPU, memory and (storage_mb) ephemeral-storage
// limits and requests.
func resources(cfg Config, spec sandbox.Spec) (corev1.ResourceRequirements, error) {
	es := cfg.envSettings(spec.Env)
	cpu := spec.CPU
	if es.CPU > 0 {
		cpu = es.CPU
	}
	if cpu <= 0 {
		cpu = cfg.DefaultCPU
	}
	mem := spec.MemoryMB
	if es.MemoryMB > 0 {
		mem = es.MemoryMB
	}
	if mem <= 0 {
		mem = cfg.DefaultMemoryMB
	}
	milli := int64(math.Ceil(cpu * 1000))
	if milli > 1<<40 {
		return corev1.ResourceRequirements{}, fmt.Errorf("cpu %g is more than any node has", cpu)
	}
	reqMilli := max(int64(math.Ceil(float64(milli)*cfg.CPURequestFraction)), 1)
	memBytes := int64(mem) << 20
	reqMem := max(int64(math.Ceil(float64(memBytes)*cfg.MemoryRequestFraction)), 1<<20)
	res := corev1.ResourceRequirements{
		Limits: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(milli, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(memBytes, resource.BinarySI),
		},
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(reqMilli, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(reqMem, resource.BinarySI),
		},
	}
	if spec.StorageMB > 0 {
		// The kubelet evicts a pod past its ephemeral-storage limit (its
		// writable layer, logs and emptyDirs). The request is a fraction:
		// a limit given without one would be requested whole.
		limit := int64(spec.StorageMB) << 20
		req := max(int64(math.Ceil(float64(limit)*cfg.StorageRequestFraction)), 1<<20)
		res.Limits[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(limit, resource.BinarySI)
		res.Requests[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(req, resource.BinarySI)
	}
	return res, nil
}

// withRegistry puts registry before image when image names no registry
// host (its first path part has no '.' or ':' and is not localhost).
func withRegistry(registry, image string) string {
	if registry == "" || image == "" {
		return image
	}
	first, _, hasPath := strings.Cut(image, "/")
	if hasPath && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return image
	}
	return strings.TrimSuffix(registry, "/") + "/" + image
}

// resourceMB is a quantity of mb MiB.
func resourceMB(mb int) resource.Quantity {
	return *resource.NewQuantity(int64(mb)<<20, resource.BinarySI)
}

// objects is what one deploy creates: the pod, and its NetworkPolicy and
// Secret when there are to be any (nil otherwise).
type objects struct {
	pod    *corev1.Pod
	policy *networkingv1.NetworkPolicy
	secret *corev1.Secret
}

// build makes a deploy's objects. The pod is gated when a policy or Secret
// must exist before it runs.
func build(cfg Config, ns, serverNS string, spec sandbox.Spec, id string) (objects, error) {
	es := cfg.envSettings(spec.Env)
	image := withRegistry(cfg.ImageRegistry, spec.Image)
	if es.Image != "" {
		image = es.Image
	}
	if image == "" {
		return objects{}, fmt.Errorf("env.toml names no image: the k8s sandbox runs images (set image in env.toml, or envs.%s.image)", spec.Env)
	}
	if spec.Port <= 0 || spec.Port > 65535 {
		return objects{}, fmt.Errorf("no port to reach (port %d); set the port the env listens on in its env.toml", spec.Port)
	}
	if spec.Terminal != nil && cfg.TerminalImage == "" {
		return objects{}, errNoTerminalImage
	}
	res, err := resources(cfg, spec)
	if err != nil {
		return objects{}, err
	}
	var workdir string
	if spec.Terminal != nil {
		if workdir, err = terminalWorkdir(spec); err != nil {
			return objects{}, err
		}
	}
	labels := objectLabels(spec.Labels, id)
	meta := metav1.ObjectMeta{Name: id, Namespace: ns, Labels: labels, Annotations: annotations(spec.Labels)}
	env, data := envVars(spec, id, id, cfg.EnvSecret)

	sec := securityOf(cfg, spec)
	no := false
	deadline := int64(math.Ceil(time.Duration(cfg.ActiveDeadline).Seconds()))
	grace := int64(math.Ceil(time.Duration(cfg.TerminationGrace).Seconds()))
	tmp := resourceMB(cfg.TmpMB)
	pod := &corev1.Pod{
		ObjectMeta: meta,
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:         &deadline,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  &cfg.AutomountServiceAccountToken,
			ServiceAccountName:            cfg.ServiceAccount,
			EnableServiceLinks:            &no,
			NodeSelector:                  cfg.NodeSelector,
			Tolerations:                   tolerations(cfg.Tolerations),
			PriorityClassName:             cfg.PriorityClass,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   &sec.nonRoot,
				RunAsUser:      sec.runAs,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           image,
				ImagePullPolicy: corev1.PullPolicy(cfg.ImagePullPolicy),
				Ports:           []corev1.ContainerPort{{Name: "env", ContainerPort: int32(spec.Port), Protocol: corev1.ProtocolTCP}},
				Env:             env,
				Resources:       res,
				// On a failure the log's tail is the termination message:
				// errors quote it with no pods/log permission.
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no,
					Privileged:               &no,
					ReadOnlyRootFilesystem:   &sec.readOnly,
					Capabilities:             &corev1.Capabilities{Drop: sec.drop},
				},
			}},
		},
	}
	// Scratch space on /tmp, but over a terminal env's own writable root,
	// whose /tmp may hold what its image put there.
	if spec.Terminal == nil || sec.readOnly {
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}}
		pod.Spec.Volumes = []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &tmp}}}}
	}
	if spec.Terminal != nil {
		withTerminal(cfg, pod, workdir)
	}
	if cfg.SpreadOver != "" {
		// Soft: a full node still takes pods, and a test cluster of one
		// node places them all; every env pod in the namespace counts,
		// whichever server deployed it.
		pod.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: cfg.SpreadOver, WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: labelSandbox, Operator: metav1.LabelSelectorOpExists}}},
		}}
	}
	if cfg.RuntimeClass != "" {
		rc := cfg.RuntimeClass
		pod.Spec.RuntimeClassName = &rc
	}
	for _, s := range cfg.ImagePullSecrets {
		pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	o := objects{pod: pod}
	if data != nil {
		immutable := true
		o.secret = &corev1.Secret{ObjectMeta: *meta.DeepCopy(), Type: corev1.SecretTypeOpaque, Data: data, Immutable: &immutable}
	}
	if cfg.NetworkPolicy {
		o.policy = policy(cfg, meta, serverNS, spec)
	}
	if o.secret != nil || o.policy != nil {
		pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: gateIsolation}}
	}
	return o, nil
}

// policy is the pod's NetworkPolicy: in to the env port from the server's
// pods (and server_cidrs) only; out nowhere unless egress is allowed
// (egressCIDRs).
func policy(cfg Config, meta metav1.ObjectMeta, serverNS string, spec sandbox.Spec) *networkingv1.NetworkPolicy {
	port := intstr.FromInt32(int32(spec.Port))
	tcp := corev1.ProtocolTCP
	var from []networkingv1.NetworkPolicyPeer
	if len(cfg.ServerPodLabels) > 0 {
		from = append(from, networkingv1.NetworkPolicyPeer{
			PodSelector:       &metav1.LabelSelector{MatchLabels: cfg.ServerPodLabels},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": serverNS}},
		})
	}
	for _, c := range cfg.ServerCIDRs {
		from = append(from, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c}})
	}
	var egress []networkingv1.NetworkPolicyEgressRule
	if cidrs := egressCIDRs(cfg, spec); len(cidrs) > 0 {
		rule := networkingv1.NetworkPolicyEgressRule{}
		for _, c := range cidrs {
			rule.To = append(rule.To, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c}})
		}
		egress = append(egress, rule)
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: *meta.DeepCopy(),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelSandbox: meta.Name}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  from,
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
			Egress: egress,
		},
	}
}

func tolerations(ts []Toleration) []corev1.Toleration {
	var out []corev1.Toleration
	for _, t := range ts {
		out = append(out, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value,
			Effect: corev1.TaintEffect(t.Effect), TolerationSeconds: t.TolerationSeconds})
	}
	return out
}

// ownedBy makes pod the owner of meta's object, so the garbage collector
// removes it with the pod.
func ownedBy(meta *metav1.ObjectMeta, pod *corev1.Pod) {
	meta.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}
}
