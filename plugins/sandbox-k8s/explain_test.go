package k8s

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

// Explain tells a trainer what became of an env's pod and its node, from
// what the API server says of both; a pod running on a healthy node gets
// "", and node facts the plugin may not read are left out.
func TestExplain(t *testing.T) {
	now := metav1.Now()
	evicted := []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}}
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	for _, tc := range []struct {
		name       string
		pod        *corev1.Pod // nil: none
		node       *corev1.Node
		nodeDenied bool
		seenGoing  *corev1.Pod // deleted, as the plugin's informer saw it go
		want       []string    // "" alone: an empty answer
	}{
		{name: "pod gone", want: []string{"its pod envs/env-1 is gone (deleted)"}},
		{name: "gone, seen going", seenGoing: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Spec: corev1.PodSpec{NodeName: "n2"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: evicted}},
			node: &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}, Status: corev1.NodeStatus{Conditions: ready}},
			want: []string{"its pod envs/env-1 (node n2) was evicted (through the Eviction API, as kubectl drain does) (EvictionByEvictionAPI: Eviction API: evicting); node n2 is cordoned (drained or being drained)"}},
		{name: "healthy", pod: &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n2"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
			node: &corev1.Node{Status: corev1.NodeStatus{Conditions: ready}}, want: []string{""}},
		{name: "drained", pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Spec: corev1.PodSpec{NodeName: "n2"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: evicted}},
			node: &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}, Status: corev1.NodeStatus{Conditions: ready}},
			want: []string{"its pod envs/env-1 (node n2) was evicted (through the Eviction API, as kubectl drain does) (EvictionByEvictionAPI: Eviction API: evicting); node n2 is cordoned (drained or being drained)"}},
		{name: "node down", pod: &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n2"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
			node: &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
				Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status."}}}},
			want: []string{"its pod envs/env-1 (node n2): node n2 is not Ready (NodeStatusUnknown: Kubelet stopped posting node status.)"}},
		{name: "node gone", pod: &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n2"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
			want: []string{"node n2 is gone"}},
		{name: "nodes not readable", pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Spec: corev1.PodSpec{NodeName: "n2"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}, nodeDenied: true,
			want: []string{"its pod envs/env-1 (node n2) was deleted"}},
		{name: "oom", pod: &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n2"}, Status: corev1.PodStatus{Phase: corev1.PodFailed,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "env", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}}},
			node: &corev1.Node{Status: corev1.NodeStatus{Conditions: ready}},
			want: []string{"(node n2) ended: container env exited with code 137 (OOMKilled)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, cs := newFake(t, DefaultConfig(), running)
			if tc.pod != nil {
				tc.pod.Name, tc.pod.Namespace, tc.pod.UID = "env-1", "envs", "uid-env-1"
				if err := cs.Tracker().Add(tc.pod); err != nil {
					t.Fatal(err)
				}
			}
			if tc.node != nil {
				tc.node.Name = "n2"
				if err := cs.Tracker().Add(tc.node); err != nil {
					t.Fatal(err)
				}
			}
			if tc.seenGoing != nil {
				tc.seenGoing.Name, tc.seenGoing.Namespace, tc.seenGoing.UID = "env-1", "envs", "uid-env-1"
				s, _ := p.setup()
				s.ends = newEnds()
				s.ends.deleted(cache.DeletedFinalStateUnknown{Key: "envs/env-1", Obj: tc.seenGoing})
			}
			if tc.nodeDenied {
				cs.PrependReactor("get", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n2", nil)
				})
			}
			sb := sandbox.Sandbox{ID: "env-1", State: state{Namespace: "envs", Pod: "env-1", UID: "uid-env-1"}.encode()}
			got, err := p.Explain(context.Background(), sb)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if (w == "" && got != "") || !strings.Contains(got, w) {
					t.Errorf("got %q, want %q", got, w)
				}
			}
			if tc.nodeDenied && strings.Contains(got, "cordoned") {
				t.Errorf("got %q without leave to read nodes", got)
			}
		})
	}
}
