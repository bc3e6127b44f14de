package k8s

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

// Terminate deletes the handle's pod (its NetworkPolicy and Secret go with
// it: the garbage collector removes what the pod owns). A pod that is gone,
// already being deleted, or replaced by another of its name is ErrNotFound.
// It returns once the API server has accepted the deletion: the kubelet
// stops the env within termination_grace.
func (p *Plugin) Terminate(ctx context.Context, sb sandbox.Sandbox) error {
	s, err := p.setup()
	if err != nil {
		return err
	}
	st, err := decodeState(sb)
	if err != nil {
		return err
	}
	pod, err := s.cs.CoreV1().Pods(st.Namespace).Get(ctx, st.Pod, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("sandbox %s (pod %s/%s): gone: %w", sb.ID, st.Namespace, st.Pod, sandbox.ErrNotFound)
	case err != nil:
		return fmt.Errorf("sandbox-k8s: terminating %s: %w", sb.ID, s.apiError("get", "pods", err))
	case st.UID != "" && string(pod.UID) != st.UID:
		return fmt.Errorf("sandbox %s (pod %s/%s): gone (another pod has its name now): %w", sb.ID, st.Namespace, st.Pod, sandbox.ErrNotFound)
	case pod.DeletionTimestamp != nil:
		return fmt.Errorf("sandbox %s (pod %s/%s): already being deleted: %w", sb.ID, st.Namespace, st.Pod, sandbox.ErrNotFound)
	}
	if pod.Status.Phase == corev1.PodFailed {
		// It ended on its own mid-episode (evicted, OOM-killed, out of its
		// active_deadline): say why, once, where the operator looks.
		p.log.Warn("env pod had ended before it was terminated", "sandbox", sb.ID, "pod", st.Namespace+"/"+st.Pod, "why", ended(pod))
	}
	st.UID = string(pod.UID)
	if err := s.deletePod(ctx, st, -1); err != nil {
		if errors.Is(err, sandbox.ErrNotFound) {
			return fmt.Errorf("sandbox %s: %w", sb.ID, err)
		}
		return fmt.Errorf("sandbox-k8s: terminating %s: %w", sb.ID, err)
	}
	return nil
}

// deletePod deletes the pod st names, only if it is still that pod (its
// UID); grace < 0 is termination_grace. Gone is ErrNotFound.
func (s *setup) deletePod(ctx context.Context, st state, grace int64) error {
	opts := metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationBackground)}
	if grace >= 0 {
		opts.GracePeriodSeconds = &grace
	}
	if st.UID != "" {
		uid := types.UID(st.UID)
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := s.cs.CoreV1().Pods(st.Namespace).Delete(ctx, st.Pod, opts)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return fmt.Errorf("pod %s/%s: gone: %w", st.Namespace, st.Pod, sandbox.ErrNotFound)
	}
	if err != nil {
		return s.apiError("delete", "pods", err)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// listPage is how many pods one List call asks for.
const listPage = 500

// List returns the pods this plugin created whose labels include labels,
// found by label selector (a label value Kubernetes cannot hold is
// selected by its digest, then checked exactly). A pod being deleted is
// not listed; one that ended on its own (its deadline, an eviction) is, so
// reaping removes it.
func (p *Plugin) List(ctx context.Context, want map[string]string) ([]sandbox.Sandbox, error) {
	s, err := p.setup()
	if err != nil {
		return nil, err
	}
	sel := labels.Set{}
	keys := make([]string, 0, len(want))
	for k, v := range want {
		if selectable(k) {
			sel[k] = labelValue(v)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	selector := labelSandbox
	if len(sel) > 0 {
		selector += "," + labels.SelectorFromSet(sel).String()
	}
	var out []sandbox.Sandbox
	opts := metav1.ListOptions{LabelSelector: selector, Limit: listPage}
	for {
		page, err := s.cs.CoreV1().Pods(s.ns).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("sandbox-k8s: listing pods (%s): %w", selector, s.apiError("list", "pods", err))
		}
		for i := range page.Items {
			pod := &page.Items[i]
			if pod.DeletionTimestamp != nil {
				continue
			}
			have := labelsOf(pod.ObjectMeta)
			if !matches(have, want) {
				continue
			}
			sb := sandbox.Sandbox{ID: pod.Labels[labelSandbox], Labels: have,
				State: state{Namespace: pod.Namespace, Pod: pod.Name, UID: string(pod.UID)}.encode()}
			if pod.Status.PodIP != "" && len(pod.Spec.Containers) > 0 && len(pod.Spec.Containers[0].Ports) > 0 {
				sb.Endpoint = fmt.Sprintf("http://%s:%d", pod.Status.PodIP, pod.Spec.Containers[0].Ports[0].ContainerPort)
			}
			out = append(out, sb)
		}
		if page.Continue == "" {
			return out, nil
		}
		opts.Continue = page.Continue
	}
}

func matches(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// execOutputMax caps what Exec keeps of each stream.
const execOutputMax = 1 << 20

// Exec runs cmd in the env's container through the pods/exec subresource
// (WebSocket, falling back to SPDY on servers without it) and returns its
// exit code and output, each stream capped at 1 MiB.
func (p *Plugin) Exec(ctx context.Context, sb sandbox.Sandbox, cmd []string) (sandbox.ExecResult, error) {
	s, err := p.setup()
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	st, err := decodeState(sb)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	if len(cmd) == 0 {
		return sandbox.ExecResult{}, fmt.Errorf("sandbox %s: no command to run", sb.ID)
	}
	if s.rest == nil {
		return sandbox.ExecResult{}, fmt.Errorf("sandbox %s: this client cannot exec: %w", sb.ID, sandbox.ErrExecUnsupported)
	}
	pod, err := s.cs.CoreV1().Pods(st.Namespace).Get(ctx, st.Pod, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || err == nil && st.UID != "" && string(pod.UID) != st.UID:
		return sandbox.ExecResult{}, fmt.Errorf("sandbox %s (pod %s/%s): gone: %w", sb.ID, st.Namespace, st.Pod, sandbox.ErrNotFound)
	case err != nil:
		return sandbox.ExecResult{}, fmt.Errorf("sandbox-k8s: exec in %s: %w", sb.ID, s.apiError("get", "pods", err))
	case pod.Status.Phase != corev1.PodRunning:
		return sandbox.ExecResult{}, fmt.Errorf("sandbox %s (pod %s/%s) is not running (%s), so nothing can run in it", sb.ID, st.Namespace, st.Pod, ended(pod))
	}
	req := s.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(st.Namespace).Name(st.Pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: containerName, Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(s.rest, "GET", req.URL().String())
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("sandbox-k8s: exec in %s: %w", sb.ID, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(s.rest, "POST", req.URL())
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("sandbox-k8s: exec in %s: %w", sb.ID, err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("sandbox-k8s: exec in %s: %w", sb.ID, err)
	}
	var stdout, stderr cappedBuffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	res := sandbox.ExecResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit utilexec.ExitError
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &exit) && exit.Exited():
		res.ExitCode = exit.ExitStatus()
		return res, nil
	case apierrors.IsForbidden(err) || strings.Contains(err.Error(), "forbidden"):
		return res, fmt.Errorf("sandbox-k8s: exec in pod %s/%s: forbidden: the plugin may not exec in pods there; add verbs \"create\" and \"get\" on \"pods/exec\" to its Role (deploy/kubernetes/rbac.yaml): %w",
			st.Namespace, st.Pod, err)
	}
	return res, fmt.Errorf("sandbox-k8s: exec %q in pod %s/%s: %w", cmd, st.Namespace, st.Pod, err)
}

// cappedBuffer keeps the first execOutputMax bytes written to it.
type cappedBuffer struct{ b bytes.Buffer }

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if room := execOutputMax - c.b.Len(); room > 0 {
		c.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *cappedBuffer) String() string { return c.b.String() }
