package k8s

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

var _ sandbox.Explainer = (*Plugin)(nil)

// disruptions glosses the reasons Kubernetes gives a pod's DisruptionTarget
// condition, for a trainer who reads the episode's error.
var disruptions = map[string]string{
	"EvictionByEvictionAPI":  "evicted (through the Eviction API, as kubectl drain does)",
	"PreemptionByScheduler":  "preempted by the scheduler for a pod of higher priority",
	"DeletionByTaintManager": "deleted by the taint manager (its node is tainted NoExecute: unreachable or not ready)",
	"DeletionByPodGC":        "deleted by the pod garbage collector (its node is gone)",
	"TerminationByKubelet":   "ended by its kubelet (node pressure or node shutdown)",
}

// Explain says what became of the handle's pod and its node: evicted,
// deleted, ended (and how), its node cordoned, not Ready or gone. A pod
// already gone is told from its last state, when this process watched it
// go (ends.go). Node facts need "get nodes" (a ClusterRole;
// docs/kubernetes.md): without it the answer names the node only. "" when
// the pod runs on a Ready node that is not cordoned.
func (p *Plugin) Explain(ctx context.Context, sb sandbox.Sandbox) (string, error) {
	s, err := p.setup()
	if err != nil {
		return "", err
	}
	st, err := decodeState(sb)
	if err != nil {
		return "", nil // not ours to explain
	}
	name := st.Namespace + "/" + st.Pod
	pod, err := s.cs.CoreV1().Pods(st.Namespace).Get(ctx, st.Pod, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err), err == nil && st.UID != "" && string(pod.UID) != st.UID:
		// Gone: what it was last seen as, if this process saw it go.
		if pod = s.ends.last(types.UID(st.UID)); pod == nil {
			return fmt.Sprintf("its pod %s is gone (deleted)", name), nil
		}
	case err != nil:
		return "", fmt.Errorf("sandbox-k8s: explaining %s: %w", sb.ID, s.apiError("get", "pods", err))
	}
	var parts []string
	if c := disruption(pod); c != nil {
		gloss := disruptions[c.Reason]
		if gloss == "" {
			gloss = "disrupted"
		}
		parts = append(parts, fmt.Sprintf("was %s (%s: %s)", gloss, c.Reason, c.Message))
	} else if pod.DeletionTimestamp != nil {
		parts = append(parts, "was deleted")
	}
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		parts = append(parts, "ended: "+ended(pod))
	}
	node := pod.Spec.NodeName
	nodeWhy := ""
	if node != "" {
		nodeWhy = s.nodeTrouble(ctx, node)
	}
	if len(parts) == 0 && nodeWhy == "" {
		return "", nil
	}
	msg := "its pod " + name
	if node != "" {
		msg += " (node " + node + ")"
	}
	if len(parts) > 0 {
		msg += " " + strings.Join(parts, "; ")
	}
	if nodeWhy != "" {
		sep := ";"
		if len(parts) == 0 {
			sep = ":"
		}
		msg += sep + " node " + node + " " + nodeWhy
	}
	return msg, nil
}

// disruption is the pod's DisruptionTarget condition, if it is true.
func disruption(pod *corev1.Pod) *corev1.PodCondition {
	for i, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// nodeTrouble says what is wrong with the node ("" when nothing is, or
// the plugin may not look: node facts are a courtesy).
func (s *setup) nodeTrouble(ctx context.Context, name string) string {
	n, err := s.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "is gone"
	case err != nil:
		return ""
	}
	var why []string
	if n.Spec.Unschedulable {
		why = append(why, "is cordoned (drained or being drained)")
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			why = append(why, fmt.Sprintf("is not Ready (%s: %s)", c.Reason, c.Message))
		}
	}
	return strings.Join(why, " and ")
}
