package k8s

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

// maxEnds bounds the deleted pods remembered (a few hundred bytes each).
const maxEnds = 4096

// ends remembers the last state the API server showed of each of this
// server's env pods that was deleted, so Explain can say what became of
// a pod that is already gone: an evicted pod is deleted within seconds of
// its env's end, before a trainer's next step finds the env silent.
type ends struct {
	once  sync.Once
	stop  chan struct{}
	mu    sync.Mutex
	byUID map[types.UID]*corev1.Pod
	order []types.UID // oldest first
}

func newEnds() *ends { return &ends{stop: make(chan struct{}), byUID: map[types.UID]*corev1.Pod{}} }

// watchEnds starts, once, an informer over the env pods of the server that
// deploys with labels (its pods' deletions are what it keeps).
func (s *setup) watchEnds(labels map[string]string) {
	if s.ends == nil {
		return // a caller's client (Use): no informer
	}
	s.ends.once.Do(func() {
		sel := "app.kubernetes.io/managed-by=" + managedBy
		if v, ok := labels[sandbox.LabelServer]; ok && selectable(sandbox.LabelServer) {
			sel += "," + sandbox.LabelServer + "=" + labelValue(v)
		}
		f := informers.NewSharedInformerFactoryWithOptions(s.cs, 0, informers.WithNamespace(s.ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
		inf := f.Core().V1().Pods().Informer()
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: s.ends.deleted})
		f.Start(s.ends.stop)
	})
}

// close stops the informer (a new configuration replaced this one).
func (e *ends) close() {
	if e != nil {
		close(e.stop)
	}
}

func (e *ends) deleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	// What Explain reads of it, no more (no spec, no env variables).
	kept := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID,
		DeletionTimestamp: pod.DeletionTimestamp}, Spec: corev1.PodSpec{NodeName: pod.Spec.NodeName}, Status: pod.Status}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, seen := e.byUID[pod.UID]; !seen {
		e.order = append(e.order, pod.UID)
	}
	e.byUID[pod.UID] = kept
	for len(e.order) > maxEnds {
		delete(e.byUID, e.order[0])
		e.order = e.order[1:]
	}
}

// last is the last state of a deleted pod, or nil.
func (e *ends) last(uid types.UID) *corev1.Pod {
	if e == nil || uid == "" {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.byUID[uid]
}
