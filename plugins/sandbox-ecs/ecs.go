// Package ecs is the sandbox plugin that runs each episode's env as an AWS
// ECS task on Fargate (awsvpc networking), so the server stays one small
// process however many envs run. Deploy is RunTask, idempotent through a
// client token derived from the deploy's labels, paced by a launch limiter
// and followed by DescribeTasks until the task is RUNNING (one poller per
// cluster describes every waiting task, 100 to a call); the endpoint is
// the task ENI's private IP and the env's port. Terminate is StopTask; List
// finds tasks by StartedBy (the server) and their tags (the labels). The
// handle holds the cluster and task ARN only. Credentials come from the AWS
// SDK's default chain and are never logged. Exec is unsupported.
//
// The stand-in in package standin speaks the same API over HTTP and runs
// tasks on the local Docker engine, for tests; docs/ecs.md is the guide.
package ecs

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/hashicorp/go-hclog"
	"golang.org/x/time/rate"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/config"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// Version is the plugin's version.
const Version = "0.1.0"

// Name is the plugin's name, as Info says and users write it.
const Name = "ecs"

// API is the part of the ECS client the plugin uses (*ecs.Client).
type API interface {
	RunTask(context.Context, *ecs.RunTaskInput, ...func(*ecs.Options)) (*ecs.RunTaskOutput, error)
	DescribeTasks(context.Context, *ecs.DescribeTasksInput, ...func(*ecs.Options)) (*ecs.DescribeTasksOutput, error)
	StopTask(context.Context, *ecs.StopTaskInput, ...func(*ecs.Options)) (*ecs.StopTaskOutput, error)
	ListTasks(context.Context, *ecs.ListTasksInput, ...func(*ecs.Options)) (*ecs.ListTasksOutput, error)
	RegisterTaskDefinition(context.Context, *ecs.RegisterTaskDefinitionInput, ...func(*ecs.Options)) (*ecs.RegisterTaskDefinitionOutput, error)
	DescribeTaskDefinition(context.Context, *ecs.DescribeTaskDefinitionInput, ...func(*ecs.Options)) (*ecs.DescribeTaskDefinitionOutput, error)
}

// Plugin is the ECS sandbox. Its methods are safe for concurrent use.
type Plugin struct {
	log hclog.Logger

	mu       sync.Mutex
	cur      *setup             // nil until Configure
	taskDefs map[string]taskDef // prepared envs, by prepareKey
}

// setup is one configuration with the client and limiter built from it;
// Configure swaps it whole, so a call sees one consistent setup.
type setup struct {
	cfg     Config
	api     API
	limiter *rate.Limiter

	mu      sync.Mutex
	pollers map[string]*poller // by cluster
}

// poller is the cluster's poller (handles may name another cluster than
// the configured one: an earlier configuration's).
func (s *setup) poller(cluster string) *poller {
	s.mu.Lock()
	defer s.mu.Unlock()
	pl, ok := s.pollers[cluster]
	if !ok {
		pl = newPoller(s.api, cluster)
		s.pollers[cluster] = pl
	}
	return pl
}

var (
	_ sandbox.Plugin   = (*Plugin)(nil)
	_ sandbox.Preparer = (*Plugin)(nil)
	_ sdk.Configurer   = (*Plugin)(nil)
)

// New returns the ECS sandbox, unconfigured: Configure must name at least
// the subnets.
func New() *Plugin {
	return &Plugin{log: sdk.Logger(), taskDefs: map[string]taskDef{}}
}

// SetLogger replaces the plugin's logger.
func (p *Plugin) SetLogger(l hclog.Logger) { p.log = l }

// Info describes the plugin.
func (p *Plugin) Info() sdk.Info {
	return sdk.Info{Name: Name, Kind: sdk.KindSandbox, Version: Version, ConfigSchema: json.RawMessage(configSchema)}
}

// Configure checks a configuration and builds the ECS client from it, with
// credentials from the SDK's default chain (environment, shared profile,
// container or instance role).
func (p *Plugin) Configure(ctx context.Context, raw json.RawMessage) error {
	cfg := DefaultConfig()
	if err := config.Decode("sandbox-ecs", raw, &cfg); err != nil {
		return err
	}
	if err := cfg.check(); err != nil {
		return err
	}
	api, err := newClient(ctx, cfg)
	if err != nil {
		return err
	}
	cfg.Region = api.Options().Region // awslogs needs it spelt out
	p.Use(cfg, api)
	return nil
}

// Use installs a checked configuration with a client of the caller's (a
// test's); Configure calls it with the real one.
func (p *Plugin) Use(cfg Config, api API) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cur = &setup{cfg: cfg, api: api, limiter: rate.NewLimiter(rate.Limit(cfg.LaunchRate), cfg.LaunchBurst), pollers: map[string]*poller{}}
	p.taskDefs = map[string]taskDef{} // a new cluster or role: prepare again
}

// newClient builds the ECS client: the SDK's adaptive retry (it slows down
// on throttling errors) without the standard retryer's client-side retry
// quota, which a burst of throttled launches would exhaust into errors.
func newClient(ctx context.Context, cfg Config) (*ecs.Client, error) {
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) {
				o.StandardOptions = append(o.StandardOptions, func(so *retry.StandardOptions) {
					so.MaxAttempts = cfg.MaxAttempts
					so.RateLimiter = ratelimit.None
				})
			})
		}),
	}
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("sandbox-ecs: loading the AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		return nil, errors.New("sandbox-ecs config: no AWS region: set region, or AWS_REGION in the server's environment")
	}
	return ecs.NewFromConfig(awsCfg, func(o *ecs.Options) {
		if cfg.EndpointURL != "" {
			o.BaseEndpoint = aws.String(cfg.EndpointURL)
		}
	}), nil
}

func (p *Plugin) setup() (*setup, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		return nil, errors.New("sandbox-ecs is not configured: give it at least subnets (--sandbox-config subnets='[\"subnet-…\"]'; docs/ecs.md)")
	}
	return p.cur, nil
}

// state is what a handle's State holds: enough for any plugin process to
// find the task. No secrets: the env's variables stay out.
type state struct {
	Cluster string `json:"cluster"`
	Task    string `json:"task"` // the task's ARN
}

func (s state) encode() []byte {
	b, _ := json.Marshal(s)
	return b
}

func decodeState(sb sandbox.Sandbox) (state, error) {
	var st state
	if len(sb.State) == 0 || json.Unmarshal(sb.State, &st) != nil || st.Task == "" {
		return state{}, fmt.Errorf("sandbox %s: its handle names no ECS task (not deployed by sandbox-ecs, or already forgotten): %w", sb.ID, sandbox.ErrNotFound)
	}
	return st, nil
}

// clientToken makes RunTask idempotent: the same deploy (its nonce label)
// asks for the same token, so a call the SDK retries after a lost reply
// starts one task, not two. Without a deploy label (direct callers) each
// Deploy gets a fresh one.
func clientToken(labels map[string]string) string {
	deploy, ok := labels[sandbox.LabelDeploy]
	if !ok || deploy == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}
	sum := sha256.Sum256([]byte(labels[sandbox.LabelServer] + "\x00" + labels[sandbox.LabelEpisode] + "\x00" + deploy))
	return hex.EncodeToString(sum[:16])
}

// sandboxID is the sandbox's id: known before RunTask (the env gets it as
// AGENTENV_SANDBOX_ID), and a tag of the task so List finds it again.
func sandboxID(token string) string { return "ecs-" + token[:20] }
