package ecs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/smithy-go"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

// Terminate stops the handle's task. A task that is gone, or already
// stopping, is ErrNotFound. It then waits up to stop_wait for the task to
// reach STOPPED; the stop is requested either way, so a wait cut short is
// not an error.
func (p *Plugin) Terminate(ctx context.Context, sb sandbox.Sandbox) error {
	s, err := p.setup()
	if err != nil {
		return err
	}
	st, err := decodeState(sb)
	if err != nil {
		return err
	}
	task, err := describeTask(ctx, s.api, st)
	if err != nil {
		return fmt.Errorf("sandbox-ecs: terminating %s: %w", sb.ID, err)
	}
	if stopped(task) {
		return fmt.Errorf("sandbox %s (task %s): already %s: %w", sb.ID, st.Task, strings.ToLower(aws.ToString(task.LastStatus)), sandbox.ErrNotFound)
	}
	_, err = s.api.StopTask(ctx, &ecs.StopTaskInput{Cluster: aws.String(st.Cluster), Task: aws.String(st.Task),
		Reason: aws.String("agentenv: sandbox terminated")})
	if isNotFound(err) {
		return fmt.Errorf("sandbox %s (task %s): %w", sb.ID, st.Task, sandbox.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("sandbox-ecs: terminating %s: StopTask %s: %w", sb.ID, st.Task, err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(s.cfg.StopWait))
	defer cancel()
	updates, stop := s.poller(st.Cluster).watch(st.Task)
	defer stop()
	for {
		select {
		case <-wctx.Done():
			p.log.Debug("stop requested; not STOPPED yet", "sandbox", sb.ID, "task", st.Task)
			return nil
		case u := <-updates:
			if u.missing != "" || u.err == nil && aws.ToString(u.task.LastStatus) == "STOPPED" {
				return nil
			}
		}
	}
}

// describeTask describes one task; a task ECS does not know is ErrNotFound.
func describeTask(ctx context.Context, api API, st state) (types.Task, error) {
	out, err := api.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String(st.Cluster), Tasks: []string{st.Task}})
	if isNotFound(err) || err == nil && len(out.Tasks) == 0 {
		return types.Task{}, fmt.Errorf("task %s in cluster %s: %w", st.Task, st.Cluster, sandbox.ErrNotFound)
	}
	if err != nil {
		return types.Task{}, fmt.Errorf("DescribeTasks %s: %w", st.Task, err)
	}
	return out.Tasks[0], nil
}

// isNotFound reports ECS's answers for a task or cluster that does not exist.
func isNotFound(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "ClusterNotFoundException":
		return true
	case "InvalidParameterException", "ClientException":
		return strings.Contains(strings.ToLower(ae.ErrorMessage()), "not found")
	}
	return false
}

// List returns the live tasks this plugin started whose labels include
// labels. With the server label it lists that server's tasks only
// (ListTasks by StartedBy); without, every running task of the cluster,
// described 100 at a time and filtered by tags.
func (p *Plugin) List(ctx context.Context, labels map[string]string) ([]sandbox.Sandbox, error) {
	s, err := p.setup()
	if err != nil {
		return nil, err
	}
	in := &ecs.ListTasksInput{Cluster: aws.String(s.cfg.Cluster), DesiredStatus: types.DesiredStatusRunning}
	if _, ok := labels[sandbox.LabelServer]; ok {
		in.StartedBy = aws.String(startedBy(labels))
	}
	var arns []string
	pages := ecs.NewListTasksPaginator(s.api, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("sandbox-ecs: ListTasks in cluster %s: %w", s.cfg.Cluster, err)
		}
		arns = append(arns, page.TaskArns...)
	}
	var out []sandbox.Sandbox
	for len(arns) > 0 {
		batch := arns[:min(100, len(arns))]
		arns = arns[len(batch):]
		desc, err := s.api.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String(s.cfg.Cluster), Tasks: batch,
			Include: []types.TaskField{types.TaskFieldTags}})
		if err != nil {
			return nil, fmt.Errorf("sandbox-ecs: DescribeTasks in cluster %s: %w", s.cfg.Cluster, err)
		}
		for _, t := range desc.Tasks {
			have, id := labelsOf(t.Tags)
			if id == "" || stopped(t) || !labelsMatch(have, labels) {
				continue
			}
			sb := sandbox.Sandbox{ID: id, Labels: have,
				State: state{Cluster: s.cfg.Cluster, Task: aws.ToString(t.TaskArn)}.encode()}
			out = append(out, sb)
		}
	}
	return out, nil
}

// Exec is not supported: ECS Exec needs the SSM agent and a session
// channel, which agentenv does not speak.
func (p *Plugin) Exec(_ context.Context, sb sandbox.Sandbox, _ []string) (sandbox.ExecResult, error) {
	return sandbox.ExecResult{}, fmt.Errorf("sandbox %s: sandbox-ecs cannot run commands in tasks (ECS Exec is not supported); score such tasks with tool-call verifiers: %w",
		sb.ID, sandbox.ErrExecUnsupported)
}
