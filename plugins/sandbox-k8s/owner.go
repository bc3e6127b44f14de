package k8s

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The downward API variables by which agentenv, in a pod, knows that pod
// (deploy/kubernetes/deployment.yaml sets them).
const (
	EnvPodName      = "POD_NAME"
	EnvPodNamespace = "POD_NAMESPACE"
	EnvPodUID       = "POD_UID"
)

// PodEnv is every variable of the server the plugin reads to know its pod.
var PodEnv = []string{EnvPodName, EnvPodNamespace, EnvPodUID}

// serverPod is the pod agentenv runs in, from the downward API variables;
// ok is false outside a pod (or a pod that does not set all three).
func serverPod(getenv func(string) string) (name, namespace string, uid types.UID, ok bool) {
	name, namespace, uid = getenv(EnvPodName), getenv(EnvPodNamespace), types.UID(getenv(EnvPodUID))
	return name, namespace, uid, name != "" && namespace != "" && uid != ""
}

// ownerOf is the owner reference every env pod gets: the server's pod, so
// that the garbage collector deletes a dead server's envs (and with them
// their policies and Secrets) even if no server ever starts again. nil,
// with a reason to log, when there is none to give: outside a pod,
// owner_references off, or env pods in another namespace than the
// server's (Kubernetes has no owners across namespaces: its garbage
// collector would take such an owner for gone and delete the env at once).
func ownerOf(cfg Config, envNS string, getenv func(string) string) (*metav1.OwnerReference, string, error) {
	name, ns, uid, ok := serverPod(getenv)
	switch {
	case !ok:
		return nil, "", nil
	case !cfg.OwnerReferences:
		return nil, "owner_references is off: a dead server's env pods live until active_deadline or a reap", nil
	case ns != envNS:
		return nil, fmt.Sprintf("env pods run in namespace %s, the server's pod in %s: Kubernetes has no owners across namespaces, "+
			"so a dead server's env pods live until active_deadline or a reap (run them in the server's namespace for the garbage collector to remove them)", envNS, ns), nil
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, "", fmt.Errorf("sandbox-k8s: %s=%q is not a pod name (set it from the downward API, metadata.name): %v", EnvPodName, name, errs)
	}
	return &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: name, UID: uid}, "", nil
}
