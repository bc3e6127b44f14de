package ecs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/smithy-go"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

// stopCleanup bounds the StopTask that undoes a failed Deploy.
const stopCleanup = 30 * time.Second

// Deploy runs the env as a Fargate task and returns once it is RUNNING
// with its private IP known. A task that stops first, or a RunTask that
// places nothing, is an error with ECS's reason; on any failure the task,
// if one was started, is stopped.
func (p *Plugin) Deploy(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := refuseTerminal(spec); err != nil {
		return sandbox.Sandbox{}, err
	}
	s, err := p.setup()
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	td, err := p.taskDefFor(ctx, s, spec)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	token := clientToken(spec.Labels)
	id := sandboxID(token)
	tags, err := tagsOf(spec.Labels, id)
	if err != nil {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox-ecs: env %q: %w", spec.Env, err)
	}
	in := runTaskInput(s.cfg, td, spec, token, tags)
	if err := s.limiter.Wait(ctx); err != nil {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox-ecs: env %q: waiting for a launch slot (launch_rate %g/s, launch_burst %d): %w",
			spec.Env, s.cfg.LaunchRate, s.cfg.LaunchBurst, err)
	}
	out, err := s.api.RunTask(ctx, in)
	if err != nil {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox-ecs: env %q: RunTask in cluster %s: %w%s", spec.Env, s.cfg.Cluster, err, throttleHint(err))
	}
	if len(out.Tasks) == 0 {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox-ecs: env %q: ECS placed no task in cluster %s: %s", spec.Env, s.cfg.Cluster, describeFailures(out.Failures))
	}
	task := out.Tasks[0]
	arn := aws.ToString(task.TaskArn)
	sb := sandbox.Sandbox{ID: id, Labels: spec.Labels, State: state{Cluster: s.cfg.Cluster, Task: arn}.encode()}
	p.log.Debug("task started", "env", spec.Env, "sandbox", id, "task", arn)
	task, err = waitRunning(ctx, s.poller(s.cfg.Cluster), task)
	if err == nil {
		var ip string
		if ip, err = privateIP(task); err == nil {
			sb.Endpoint = "http://" + net.JoinHostPort(ip, strconv.Itoa(spec.Port))
			return sb, nil
		}
	}
	err = fmt.Errorf("sandbox-ecs: env %q: task %s: %w%s", spec.Env, arn, err, logsHint(s.cfg, td, arn))
	if !stopped(task) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopCleanup)
		defer cancel()
		if _, serr := s.api.StopTask(cctx, &ecs.StopTaskInput{Cluster: aws.String(s.cfg.Cluster), Task: aws.String(arn),
			Reason: aws.String("agentenv: deploy failed")}); serr != nil && !isNotFound(serr) {
			err = errors.Join(err, fmt.Errorf("stopping it: %w", serr))
		}
	}
	return sandbox.Sandbox{}, err
}

// runTaskInput is the RunTask request of one deploy: one Fargate task of
// the env's task definition in the configured network, with the env's
// variables as container overrides.
func runTaskInput(cfg Config, td taskDef, spec sandbox.Spec, token string, tags []types.Tag) *ecs.RunTaskInput {
	in := &ecs.RunTaskInput{
		Cluster:        aws.String(cfg.Cluster),
		TaskDefinition: aws.String(td.arn),
		Count:          aws.Int32(1),
		ClientToken:    aws.String(token),
		StartedBy:      aws.String(startedBy(spec.Labels)),
		Tags:           tags,
		NetworkConfiguration: &types.NetworkConfiguration{AwsvpcConfiguration: &types.AwsVpcConfiguration{
			Subnets:        cfg.Subnets,
			SecurityGroups: cfg.SecurityGroups,
			AssignPublicIp: assignPublicIP(cfg.AssignPublicIP),
		}},
		Overrides: &types.TaskOverride{ContainerOverrides: []types.ContainerOverride{{
			Name:        aws.String(td.container),
			Environment: environment(spec, sandboxID(token)),
		}}},
	}
	if cfg.PlatformVersion != "" {
		in.PlatformVersion = aws.String(cfg.PlatformVersion)
	}
	if len(cfg.CapacityProviderStrategy) > 0 {
		for _, cp := range cfg.CapacityProviderStrategy {
			in.CapacityProviderStrategy = append(in.CapacityProviderStrategy, types.CapacityProviderStrategyItem{
				CapacityProvider: aws.String(cp.CapacityProvider), Weight: cp.Weight, Base: cp.Base})
		}
	} else {
		in.LaunchType = types.LaunchTypeFargate
	}
	return in
}

func assignPublicIP(on bool) types.AssignPublicIp {
	if on {
		return types.AssignPublicIpEnabled
	}
	return types.AssignPublicIpDisabled
}

// environment is the container's: the env's variables, then the ones every
// sandbox sets, which win. They travel in RunTask's overrides, never in the
// handle.
func environment(spec sandbox.Spec, id string) []types.KeyValuePair {
	vars := map[string]string{}
	for k, v := range spec.EnvVars {
		vars[k] = v
	}
	vars[sandbox.EnvPort] = strconv.Itoa(spec.Port)
	vars[sandbox.EnvSandboxID] = id
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]types.KeyValuePair, len(keys))
	for i, k := range keys {
		out[i] = types.KeyValuePair{Name: aws.String(k), Value: aws.String(vars[k])}
	}
	return out
}

// waitRunning follows the task until it is RUNNING, stops, or ctx (the
// deploy deadline) ends.
func waitRunning(ctx context.Context, pl *poller, task types.Task) (types.Task, error) {
	updates, stop := pl.watch(aws.ToString(task.TaskArn))
	defer stop()
	for {
		switch {
		case aws.ToString(task.LastStatus) == "RUNNING":
			return task, nil
		case stopped(task):
			return task, fmt.Errorf("stopped before RUNNING: %s", stopReason(task))
		}
		select {
		case <-ctx.Done():
			return task, fmt.Errorf("not RUNNING within the deploy deadline (last status %s): %w", aws.ToString(task.LastStatus), ctx.Err())
		case u := <-updates:
			switch {
			case u.err != nil:
				return task, fmt.Errorf("DescribeTasks: %w", u.err)
			case u.missing != "":
				return task, fmt.Errorf("ECS no longer knows the task: %s", u.missing)
			}
			task = u.task
		}
	}
}

// stopped says whether the task is stopping or stopped.
func stopped(t types.Task) bool {
	switch aws.ToString(t.LastStatus) {
	case "DEACTIVATING", "STOPPING", "DEPROVISIONING", "STOPPED":
		return true
	}
	return aws.ToString(t.DesiredStatus) == "STOPPED"
}

// stopReason words why a task stopped: ECS's reason and stop code, and each
// container's reason or exit code.
func stopReason(t types.Task) string {
	reason := aws.ToString(t.StoppedReason)
	if reason == "" {
		reason = "no reason given yet (status " + aws.ToString(t.LastStatus) + ")"
	}
	if t.StopCode != "" {
		reason += " (stop code " + string(t.StopCode) + ")"
	}
	for _, c := range t.Containers {
		var parts []string
		if r := aws.ToString(c.Reason); r != "" {
			parts = append(parts, r)
		}
		if c.ExitCode != nil {
			parts = append(parts, fmt.Sprintf("exit code %d", *c.ExitCode))
		}
		if len(parts) > 0 {
			reason += fmt.Sprintf("; container %s: %s", aws.ToString(c.Name), strings.Join(parts, ", "))
		}
	}
	return reason
}

// describeFailures words RunTask's or DescribeTasks' failures list: the
// capacity and placement problems ECS reports with no error.
func describeFailures(fs []types.Failure) string {
	if len(fs) == 0 {
		return "no failure given"
	}
	var parts []string
	for _, f := range fs {
		s := aws.ToString(f.Reason)
		if d := aws.ToString(f.Detail); d != "" {
			s += " (" + d + ")"
		}
		if a := aws.ToString(f.Arn); a != "" {
			s += " for " + a
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// privateIP is the task ENI's private IPv4 address.
func privateIP(t types.Task) (string, error) {
	for _, a := range t.Attachments {
		if aws.ToString(a.Type) != "ElasticNetworkInterface" {
			continue
		}
		for _, d := range a.Details {
			if aws.ToString(d.Name) == "privateIPv4Address" && aws.ToString(d.Value) != "" {
				return aws.ToString(d.Value), nil
			}
		}
	}
	for _, c := range t.Containers {
		for _, ni := range c.NetworkInterfaces {
			if ip := aws.ToString(ni.PrivateIpv4Address); ip != "" {
				return ip, nil
			}
		}
	}
	return "", errors.New("RUNNING but without a private IP: its task definition must use awsvpc networking")
}

// throttleHint says what to change when ECS kept throttling launches.
func throttleHint(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "ThrottlingException" {
		return " (ECS kept throttling the launches: lower launch_rate or launch_burst, or raise max_attempts)"
	}
	return ""
}

// logsHint says where a failed task's output is, when it has awslogs.
func logsHint(cfg Config, td taskDef, arn string) string {
	if cfg.LogGroup == "" || !td.registered {
		return ""
	}
	id := arn[strings.LastIndex(arn, "/")+1:]
	return fmt.Sprintf("; its output is in CloudWatch Logs, group %s, stream %s/%s/%s", cfg.LogGroup, cfg.LogStreamPrefix, td.container, id)
}
