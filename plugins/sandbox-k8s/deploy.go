package k8s

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

// cleanupTimeout bounds deleting what a failed deploy created.
const cleanupTimeout = 30 * time.Second

// Deploy runs the env as a pod and returns once it runs and its port
// accepts connections on the pod IP. On any failure the pod, if one was
// created, is deleted (its policy and Secret go with it).
func (p *Plugin) Deploy(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	s, err := p.setup()
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	id := sandboxID(spec.Labels)
	fail := func(err error) (sandbox.Sandbox, error) {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox-k8s: env %q: %w", spec.Env, err)
	}
	o, err := build(s.cfg, s.ns, s.serverNS, spec, id)
	if err != nil {
		return fail(err)
	}
	if s.owner != nil {
		o.pod.OwnerReferences = []metav1.OwnerReference{*s.owner}
	}
	if spec.NoInternet && !s.cfg.NetworkPolicy {
		p.warnOnce("no-internet:"+spec.Env, "the env asks for no internet, but network_policy is off: nothing keeps it from connecting out",
			"env", spec.Env)
	}
	s.watchEnds(spec.Labels)
	start := time.Now()
	pod, err := s.createPod(ctx, o.pod)
	if err != nil {
		return fail(err)
	}
	st := state{Namespace: s.ns, Pod: pod.Name, UID: string(pod.UID)}
	undo := func(why error) (sandbox.Sandbox, error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if err := s.deletePod(cctx, st, 0); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			why = errors.Join(why, fmt.Errorf("deleting pod %s/%s: %w", st.Namespace, st.Pod, err))
		}
		return fail(why)
	}
	if len(pod.Spec.SchedulingGates) > 0 {
		if err := s.isolate(ctx, o, pod); err != nil {
			return undo(fmt.Errorf("pod %s/%s: %w", s.ns, pod.Name, err))
		}
	}
	pod, err = s.waitRunning(ctx, pod, spec.Port)
	if err != nil {
		return undo(fmt.Errorf("pod %s/%s: %w", s.ns, st.Pod, err))
	}
	sb := sandbox.Sandbox{ID: id, Labels: labelsOf(pod.ObjectMeta), State: st.encode(),
		Endpoint: "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(spec.Port))}
	p.log.Debug("deployed", "id", id, "env", spec.Env, "namespace", s.ns, "node", pod.Spec.NodeName,
		"endpoint", sb.Endpoint, "took", time.Since(start).String())
	return sb, nil
}

// createPod creates the pod. A create whose reply was lost and is retried
// (same deploy, same name) finds its own pod and goes on with it.
func (s *setup) createPod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	got, err := s.cs.CoreV1().Pods(s.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err == nil {
		return got, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, s.apiError("create", "pods", err)
	}
	got, gerr := s.cs.CoreV1().Pods(s.ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if gerr != nil {
		return nil, s.apiError("get", "pods", gerr)
	}
	if got.Annotations[annotationLabels] != pod.Annotations[annotationLabels] || got.DeletionTimestamp != nil {
		return nil, fmt.Errorf("pod %s/%s already exists and is not this deploy's: %w", s.ns, pod.Name, err)
	}
	return got, nil
}

// isolate creates the pod's NetworkPolicy and Secret, owned by the pod, then
// lifts its scheduling gate so it may run.
func (s *setup) isolate(ctx context.Context, o objects, pod *corev1.Pod) error {
	var wg sync.WaitGroup
	var perr, serr error
	if o.policy != nil {
		ownedBy(&o.policy.ObjectMeta, pod)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.cs.NetworkingV1().NetworkPolicies(s.ns).Create(ctx, o.policy, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				perr = s.apiError("create", "networkpolicies.networking.k8s.io", err)
			}
		}()
	}
	if o.secret != nil {
		ownedBy(&o.secret.ObjectMeta, pod)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.cs.CoreV1().Secrets(s.ns).Create(ctx, o.secret, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				serr = s.apiError("create", "secrets", err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(perr, serr); err != nil {
		return err
	}
	// Only our gate goes; the test op refuses a pod whose gates changed.
	patch := fmt.Sprintf(`[{"op":"test","path":"/spec/schedulingGates","value":[{"name":%q}]},{"op":"remove","path":"/spec/schedulingGates"}]`, gateIsolation)
	if _, err := s.cs.CoreV1().Pods(s.ns).Patch(ctx, pod.Name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return s.apiError("patch", "pods", err)
	}
	return nil
}

// waitRunning follows the pod until it runs with an IP and its port
// accepts a connection, failing as soon as the pod's status says it will
// not (see podFailure), or when ctx (the deploy deadline) ends.
func (s *setup) waitRunning(ctx context.Context, pod *corev1.Pod, port int) (*corev1.Pod, error) {
	if deadline, ok := ctx.Deadline(); ok {
		// Give up a moment before the caller does, so that the error it
		// gets says what the pod was waiting for, not only "deadline".
		margin := min(2*time.Second, time.Until(deadline)/10)
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-margin))
		defer cancel()
	}
	updates, stop := s.watchPod(ctx, pod)
	defer stop()
	var probe *prober
	defer func() {
		if probe != nil {
			probe.stop()
		}
	}()
	var unschedulableSince time.Time
	grace := time.NewTimer(time.Hour)
	grace.Stop()
	defer grace.Stop()
	for {
		unsched, why := unschedulable(pod)
		switch {
		case unsched && unschedulableSince.IsZero():
			unschedulableSince = time.Now()
			grace.Reset(time.Duration(s.cfg.UnschedulableGrace))
		case !unsched:
			unschedulableSince = time.Time{}
			grace.Stop()
		}
		if err := podFailure(pod); err != nil {
			return pod, err
		}
		if pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" && probe == nil {
			probe = startProbe(ctx, net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)))
		}
		var answered <-chan error
		if probe != nil {
			answered = probe.done
		}
		select {
		case <-ctx.Done():
			if probe != nil {
				return pod, fmt.Errorf("running, but nothing answered on port %d of %s within the deploy deadline: the env must listen on all interfaces (0.0.0.0) at $AGENTENV_PORT: %w",
					port, pod.Status.PodIP, ctx.Err())
			}
			return pod, fmt.Errorf("not ready within the deploy deadline (%s): %w", describe(pod), ctx.Err())
		case <-grace.C:
			return pod, fmt.Errorf("unschedulable: %s (for %s, unschedulable_grace); %s", why,
				time.Since(unschedulableSince).Round(time.Millisecond), unschedulableHint(why))
		case err := <-answered:
			if err == nil {
				return pod, nil
			}
			return pod, fmt.Errorf("running, but port %d on %s does not answer: %w", port, pod.Status.PodIP, err)
		case u, ok := <-updates:
			if !ok {
				return pod, errors.New("watching the pod ended unexpectedly")
			}
			if u.err != nil {
				return pod, u.err
			}
			if u.deleted {
				return pod, errors.New("deleted before it was ready (by someone else, or evicted)")
			}
			pod = u.pod
		}
	}
}

// podFailure says why a pod will never get ready, or nil while it may.
func podFailure(pod *corev1.Pod) error {
	if pod.DeletionTimestamp != nil {
		return errors.New("being deleted before it was ready (by someone else, or evicted)")
	}
	switch pod.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return fmt.Errorf("ended before it was ready: %s", ended(pod))
	}
	for _, cs := range statuses(pod) {
		if t := cs.State.Terminated; t != nil && (cs.Name != terminalInit || t.ExitCode != 0) {
			return fmt.Errorf("ended before it was ready: %s", ended(pod))
		}
		w := cs.State.Waiting
		if w == nil {
			continue
		}
		switch w.Reason {
		case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
			return fmt.Errorf("image %s cannot be pulled: %s: %s; check the image name and tag, that the node can reach its registry, and image_pull_secrets for a private one%s",
				cs.Image, w.Reason, w.Message, terminalHint(cs.Name))
		case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
			return fmt.Errorf("container %s cannot start: %s: %s%s%s", cs.Name, w.Reason, w.Message, rootHint(w.Message), terminalHint(cs.Name))
		case "CrashLoopBackOff":
			return fmt.Errorf("container %s keeps crashing: %s", cs.Name, w.Message)
		}
	}
	return nil
}

// statuses are the pod's init containers' statuses, then its containers'.
func statuses(pod *corev1.Pod) []corev1.ContainerStatus {
	return append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
}

// terminalHint says what terminal_image must be when its container failed.
func terminalHint(container string) string {
	if container != terminalInit {
		return ""
	}
	return " (this container copies agentenv's terminal into the pod: terminal_image must hold the static agentenv-terminal binary at " +
		terminalImageBinary + ", one with the install subcommand; docs/kubernetes.md, \"Harbor tasks\")"
}

// ended words how a pod or its container ended.
func ended(pod *corev1.Pod) string {
	var parts []string
	if pod.Status.Reason != "" || pod.Status.Message != "" {
		parts = append(parts, strings.TrimSpace(pod.Status.Reason+": "+pod.Status.Message))
	}
	for _, cs := range statuses(pod) {
		t := cs.State.Terminated
		if t == nil || (cs.Name == terminalInit && t.ExitCode == 0) {
			continue
		}
		s := fmt.Sprintf("container %s exited with code %d", cs.Name, t.ExitCode)
		if t.Reason != "" {
			s += " (" + t.Reason + ")"
		}
		if t.Reason == "OOMKilled" {
			s += ": it used more than its memory limit " + memLimit(pod, cs.Name) + "; raise memory_mb in env.toml"
		}
		if m := strings.TrimSpace(t.Message); m != "" {
			s += "; its output ends:\n" + m
		}
		s += terminalHint(cs.Name)
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "phase " + string(pod.Status.Phase)
	}
	return strings.Join(parts, "; ")
}

func memLimit(pod *corev1.Pod, container string) string {
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if c.Name == container {
			if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
				return q.String()
			}
		}
	}
	return "(none set)"
}

// unschedulable reports whether the scheduler found no node for the pod,
// with its reason ("0/1 nodes are available: 1 Insufficient cpu.").
func unschedulable(pod *corev1.Pod) (bool, string) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true, c.Message
		}
	}
	return false, ""
}

func unschedulableHint(why string) string {
	switch {
	case strings.Contains(why, "Insufficient cpu"):
		return "no node has that much CPU free: lower the env's cpu in env.toml (or cpu_request_fraction), free some, or add nodes"
	case strings.Contains(why, "Insufficient memory"):
		return "no node has that much memory free: lower the env's memory_mb in env.toml (or memory_request_fraction), or add nodes"
	case strings.Contains(why, "taint"):
		return "every node has a taint the pod does not tolerate: set tolerations"
	case strings.Contains(why, "affinity") || strings.Contains(why, "selector"):
		return "no node matches node_selector"
	}
	return "see the scheduler's reason above"
}

func rootHint(msg string) string {
	if strings.Contains(msg, "runAsNonRoot") || strings.Contains(msg, "non-numeric user") {
		return " (the image runs as root or as a user name: give it a numeric non-root USER, or set run_as_user, or run_as_non_root=false for this env)"
	}
	return ""
}

// describe is a pod's status in a few words, for timeouts.
func describe(pod *corev1.Pod) string {
	s := "phase " + string(pod.Status.Phase)
	if pod.Status.Phase == "" {
		s = "phase Pending"
	}
	if len(pod.Spec.SchedulingGates) > 0 {
		s += ", still gated"
	}
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Reason != "" {
			s += fmt.Sprintf(", %s: %s %s", c.Type, c.Reason, c.Message)
		}
	}
	for _, cs := range statuses(pod) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			s += fmt.Sprintf(", container %s waiting: %s %s", cs.Name, w.Reason, w.Message)
		}
	}
	return strings.TrimSpace(s)
}

// podUpdate is one event of a watched pod.
type podUpdate struct {
	pod     *corev1.Pod
	deleted bool
	err     error
}

// watchPod streams the pod's changes from the version create returned,
// watching again after a watch ends (the API server closes them now and
// then) and re-reading the pod when its version has expired.
func (s *setup) watchPod(ctx context.Context, pod *corev1.Pod) (<-chan podUpdate, func()) {
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan podUpdate, 1)
	send := func(u podUpdate) bool {
		select {
		case out <- u:
			return true
		case <-ctx.Done():
			return false
		}
	}
	go func() {
		defer close(out)
		rv := pod.ResourceVersion
		failures := 0
		// reread gets the pod afresh and sends it (or its deletion); done
		// says the watch is over, err is a failed read, to be retried.
		reread := func() (done bool, err error) {
			got, err := s.cs.CoreV1().Pods(s.ns).Get(ctx, pod.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				send(podUpdate{deleted: true})
				return true, nil
			case err != nil:
				return false, err
			}
			rv = got.ResourceVersion
			return !send(podUpdate{pod: got}), nil
		}
		for ctx.Err() == nil {
			w, err := s.cs.CoreV1().Pods(s.ns).Watch(ctx, metav1.ListOptions{
				FieldSelector: "metadata.name=" + pod.Name, ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				if apierrors.IsForbidden(err) {
					send(podUpdate{err: s.apiError("watch", "pods", err)})
					return
				}
				failures++
				if failures > 20 {
					send(podUpdate{err: s.apiError("watch", "pods", err)})
					return
				}
				if !sleepCtx(ctx, time.Duration(failures)*50*time.Millisecond) {
					return
				}
				// Re-read: the version may have expired meanwhile.
				if done, _ := reread(); done {
					return
				}
				continue
			}
			expired := false
			for ev := range w.ResultChan() {
				switch ev.Type {
				case watch.Added, watch.Modified:
					if p, ok := ev.Object.(*corev1.Pod); ok && p.Name == pod.Name {
						rv = p.ResourceVersion
						failures = 0
						if !send(podUpdate{pod: p}) {
							w.Stop()
							return
						}
					}
				case watch.Deleted:
					if p, ok := ev.Object.(*corev1.Pod); ok && p.Name != pod.Name {
						continue
					}
					w.Stop()
					send(podUpdate{deleted: true})
					return
				case watch.Bookmark:
					if p, ok := ev.Object.(*corev1.Pod); ok && p.Name == pod.Name {
						rv = p.ResourceVersion
					}
				case watch.Error:
					expired = true
				}
			}
			w.Stop()
			if expired {
				if done, gerr := reread(); done {
					return
				} else if gerr != nil {
					failures++
					sleepCtx(ctx, time.Duration(failures)*50*time.Millisecond)
				}
			}
		}
	}()
	return out, cancel
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// prober dials an address until it answers: the env has bound its port.
type prober struct {
	done   chan error
	cancel context.CancelFunc
}

func startProbe(ctx context.Context, addr string) *prober {
	ctx, cancel := context.WithCancel(ctx)
	pr := &prober{done: make(chan error, 1), cancel: cancel}
	go func() {
		var d net.Dialer
		wait := time.Millisecond
		for {
			dctx, dcancel := context.WithTimeout(ctx, time.Second)
			conn, err := d.DialContext(dctx, "tcp", addr)
			dcancel()
			if err == nil {
				conn.Close()
				pr.done <- nil
				return
			}
			if !sleepCtx(ctx, wait) {
				return // the caller gave up; it reports why
			}
			wait = min(wait*2, 50*time.Millisecond)
		}
	}()
	return pr
}

func (pr *prober) stop() { pr.cancel() }
