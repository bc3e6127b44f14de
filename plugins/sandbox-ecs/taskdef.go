package ecs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

// tagDefinition holds a digest of what a registered task definition was
// registered from, so a later start reuses it instead of adding a revision.
const tagDefinition = "agentenv.definition"

// taskDef is the task definition an env runs as.
type taskDef struct {
	arn        string // family:revision ARN
	container  string // the env's container
	registered bool   // registered by this plugin (its logs are where log_group says)
}

// prepareKey tells envs apart: two bundles may have envs of the same name.
func prepareKey(spec sandbox.Spec) string { return spec.Env + "\x00" + spec.Dir + "\x00" + spec.Image }

// Prepare resolves the env's task definition: it checks an existing one
// named in envs.<env>.task_definition, or registers one from the env's
// image, port, cpu and memory (reusing the family's latest revision when
// it was registered from the same settings). serve calls it at start, so a
// missing role or a bad image name stops the server, not every reset.
func (p *Plugin) Prepare(ctx context.Context, spec sandbox.Spec) error {
	if err := refuseTerminal(spec); err != nil {
		return err
	}
	s, err := p.setup()
	if err != nil {
		return err
	}
	_, err = p.taskDefFor(ctx, s, spec)
	return err
}

// taskDefFor returns the env's prepared task definition, preparing it now
// if no Prepare did (the SDK prepares first; direct callers may not).
func (p *Plugin) taskDefFor(ctx context.Context, s *setup, spec sandbox.Spec) (taskDef, error) {
	key := prepareKey(spec)
	p.mu.Lock()
	td, ok := p.taskDefs[key]
	p.mu.Unlock()
	if ok {
		return td, nil
	}
	if spec.Port <= 0 || spec.Port > 65535 {
		return taskDef{}, fmt.Errorf("sandbox-ecs: env %q has no port: give it port = N in env.toml, the port it listens on in its task", spec.Env)
	}
	es := s.cfg.Envs[spec.Env]
	var err error
	if es.TaskDefinition != "" {
		td, err = existingTaskDef(ctx, s.api, spec, es)
	} else {
		td, err = registerTaskDef(ctx, s, spec, es)
	}
	if err != nil {
		return taskDef{}, err
	}
	p.mu.Lock()
	if p.cur == s {
		p.taskDefs[key] = td
	}
	p.mu.Unlock()
	p.log.Info("task definition ready", "env", spec.Env, "task_definition", td.arn, "registered", td.registered)
	return td, nil
}

// existingTaskDef checks a task definition the user registered: Fargate,
// awsvpc, and a container of that name that publishes the env's port.
func existingTaskDef(ctx context.Context, api API, spec sandbox.Spec, es EnvSettings) (taskDef, error) {
	container := es.Container
	if container == "" {
		container = defaultContainer
	}
	out, err := api.DescribeTaskDefinition(ctx, &ecs.DescribeTaskDefinitionInput{TaskDefinition: aws.String(es.TaskDefinition)})
	if err != nil {
		return taskDef{}, fmt.Errorf("sandbox-ecs: env %q: task definition %s (envs.%s.task_definition): %w", spec.Env, es.TaskDefinition, spec.Env, err)
	}
	d := out.TaskDefinition
	bad := func(why string) (taskDef, error) {
		return taskDef{}, fmt.Errorf("sandbox-ecs: env %q: task definition %s %s", spec.Env, aws.ToString(d.TaskDefinitionArn), why)
	}
	if d.NetworkMode != types.NetworkModeAwsvpc {
		return bad(fmt.Sprintf("has network mode %q; Fargate tasks need awsvpc", d.NetworkMode))
	}
	if !slices.Contains(d.RequiresCompatibilities, types.CompatibilityFargate) && !slices.Contains(d.Compatibilities, types.CompatibilityFargate) {
		return bad("is not compatible with Fargate (requiresCompatibilities lacks FARGATE)")
	}
	i := slices.IndexFunc(d.ContainerDefinitions, func(c types.ContainerDefinition) bool { return aws.ToString(c.Name) == container })
	if i < 0 {
		var names []string
		for _, c := range d.ContainerDefinitions {
			names = append(names, aws.ToString(c.Name))
		}
		return bad(fmt.Sprintf("has no container %q (it has %v); set envs.%s.container", container, names, spec.Env))
	}
	if pm := d.ContainerDefinitions[i].PortMappings; len(pm) > 0 && !slices.ContainsFunc(pm, func(m types.PortMapping) bool {
		return aws.ToInt32(m.ContainerPort) == int32(spec.Port)
	}) {
		return bad(fmt.Sprintf("container %q does not map port %d, the env's port in env.toml", container, spec.Port))
	}
	return taskDef{arn: aws.ToString(d.TaskDefinitionArn), container: container}, nil
}

var familyBad = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// registerTaskDef registers the env's task definition, or finds the one an
// earlier start registered from the same settings.
func registerTaskDef(ctx context.Context, s *setup, spec sandbox.Spec, es EnvSettings) (taskDef, error) {
	in, err := taskDefInput(s.cfg, spec, es)
	if err != nil {
		return taskDef{}, err
	}
	b, _ := json.Marshal(in)
	sum := sha256.Sum256(b)
	digest := hex.EncodeToString(sum[:12])
	in.Tags = []types.Tag{{Key: aws.String(tagDefinition), Value: aws.String(digest)}}
	td := taskDef{container: defaultContainer, registered: true}
	// The family's latest revision, if registered from these settings.
	if out, err := s.api.DescribeTaskDefinition(ctx, &ecs.DescribeTaskDefinitionInput{TaskDefinition: in.Family,
		Include: []types.TaskDefinitionField{types.TaskDefinitionFieldTags}}); err == nil && out.TaskDefinition != nil &&
		out.TaskDefinition.Status == types.TaskDefinitionStatusActive {
		for _, t := range out.Tags {
			if aws.ToString(t.Key) == tagDefinition && aws.ToString(t.Value) == digest {
				td.arn = aws.ToString(out.TaskDefinition.TaskDefinitionArn)
				return td, nil
			}
		}
	}
	out, err := s.api.RegisterTaskDefinition(ctx, in)
	if err != nil {
		return taskDef{}, fmt.Errorf("sandbox-ecs: env %q: RegisterTaskDefinition %s: %w", spec.Env, aws.ToString(in.Family), err)
	}
	td.arn = aws.ToString(out.TaskDefinition.TaskDefinitionArn)
	return td, nil
}

// taskDefInput is the task definition an env is registered as: one
// essential container running its image on its port, sized to the
// smallest Fargate size that holds its cpu and memory.
func taskDefInput(cfg Config, spec sandbox.Spec, es EnvSettings) (*ecs.RegisterTaskDefinitionInput, error) {
	image := es.Image
	if image == "" {
		image = spec.Image
	}
	if image == "" {
		return nil, fmt.Errorf("sandbox-ecs: env %q has no image: give it image = \"…\" in env.toml (pushed where ECS can pull it, e.g. ECR), or set envs.%s.image or envs.%s.task_definition", spec.Env, spec.Env, spec.Env)
	}
	cpu, mem := es.CPU, es.Memory
	if cpu == 0 {
		cpu = int(math.Ceil(spec.CPU * 1024))
	}
	if mem == 0 {
		mem = spec.MemoryMB
	}
	cpu, mem, err := fargateSize(cpu, mem)
	if err != nil {
		return nil, fmt.Errorf("sandbox-ecs: env %q: %w", spec.Env, err)
	}
	c := types.ContainerDefinition{
		Name:         aws.String(defaultContainer),
		Image:        aws.String(image),
		Essential:    aws.Bool(true),
		PortMappings: []types.PortMapping{{ContainerPort: aws.Int32(int32(spec.Port)), Protocol: types.TransportProtocolTcp}},
	}
	if cfg.LogGroup != "" {
		region := cfg.Region
		opts := map[string]string{"awslogs-group": cfg.LogGroup, "awslogs-stream-prefix": cfg.LogStreamPrefix}
		if region != "" {
			opts["awslogs-region"] = region
		}
		c.LogConfiguration = &types.LogConfiguration{LogDriver: types.LogDriverAwslogs, Options: opts}
	}
	in := &ecs.RegisterTaskDefinitionInput{
		Family:                  aws.String(cfg.FamilyPrefix + familyBad.ReplaceAllString(spec.Env, "-")),
		NetworkMode:             types.NetworkModeAwsvpc,
		RequiresCompatibilities: []types.Compatibility{types.CompatibilityFargate},
		Cpu:                     aws.String(strconv.Itoa(cpu)),
		Memory:                  aws.String(strconv.Itoa(mem)),
		ContainerDefinitions:    []types.ContainerDefinition{c},
	}
	if cfg.ExecutionRoleARN != "" {
		in.ExecutionRoleArn = aws.String(cfg.ExecutionRoleARN)
	}
	if cfg.TaskRoleARN != "" {
		in.TaskRoleArn = aws.String(cfg.TaskRoleARN)
	}
	return in, nil
}

// refuseTerminal refuses an env that needs agentenv's terminal injected
// (a Harbor task): a Fargate task cannot mount a binary from the host, and
// the task's own image is to run unchanged.
func refuseTerminal(spec sandbox.Spec) error {
	if spec.Terminal == nil {
		return nil
	}
	return fmt.Errorf("sandbox-ecs: env %q is a Harbor task, whose container needs agentenv's terminal server injected at deploy; "+
		"ECS cannot inject it into a Fargate task: serve this dataset with --sandbox local (Docker) or --sandbox k8s", spec.Env)
}
