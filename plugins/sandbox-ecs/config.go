package ecs

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/agentenv/agentenv/sdk/config"
)

const configSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "region": {"type": "string", "description": "AWS region (default: the SDK's, from AWS_REGION or the profile)."},
    "cluster": {"type": "string", "description": "ECS cluster name or ARN (default \"default\")."},
    "subnets": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "Subnets the tasks' ENIs go in (required)."},
    "security_groups": {"type": "array", "items": {"type": "string"}, "description": "Security groups of the tasks' ENIs; one must let the server reach the env port."},
    "assign_public_ip": {"type": "boolean", "description": "Give tasks a public IP (for pulling images without a NAT gateway). The server still connects to the private IP."},
    "platform_version": {"type": "string", "description": "Fargate platform version (default: ECS's, LATEST)."},
    "capacity_provider_strategy": {
      "type": "array",
      "description": "Capacity providers (FARGATE, FARGATE_SPOT) instead of the FARGATE launch type.",
      "items": {
        "type": "object",
        "additionalProperties": false,
        "required": ["capacity_provider"],
        "properties": {
          "capacity_provider": {"type": "string"},
          "weight": {"type": "integer", "minimum": 0, "maximum": 1000},
          "base": {"type": "integer", "minimum": 0, "maximum": 100000}
        }
      }
    },
    "execution_role_arn": {"type": "string", "description": "Task execution role of registered task definitions (needed for awslogs and private ECR images)."},
    "task_role_arn": {"type": "string", "description": "Task role of registered task definitions: the AWS permissions the env itself gets (default none)."},
    "log_group": {"type": "string", "description": "CloudWatch Logs group for the awslogs driver of registered task definitions (empty: no logs)."},
    "log_stream_prefix": {"type": "string", "description": "awslogs stream prefix (default \"agentenv\")."},
    "family_prefix": {"type": "string", "description": "Prefix of registered task definition families (default \"agentenv-\")."},
    "envs": {
      "type": "object",
      "description": "Per-env settings, by env name.",
      "additionalProperties": {
        "type": "object",
        "additionalProperties": false,
        "properties": {
          "task_definition": {"type": "string", "description": "An existing task definition (family:revision or ARN) to run instead of registering one."},
          "container": {"type": "string", "description": "The env's container in the task definition (default \"env\")."},
          "image": {"type": "string", "description": "Image to register instead of env.toml's (e.g. its ECR URI)."},
          "cpu": {"type": "integer", "minimum": 0, "description": "CPU units (1024 = 1 vCPU); default from env.toml's cpu."},
          "memory": {"type": "integer", "minimum": 0, "description": "Memory in MiB; default from env.toml's memory_mb."}
        }
      }
    },
    "endpoint_url": {"type": "string", "description": "ECS API endpoint instead of AWS's (a stand-in or a VPC endpoint)."},
    "launch_rate": {"type": "number", "exclusiveMinimum": 0, "description": "RunTask calls per second at most (default 10)."},
    "launch_burst": {"type": "integer", "minimum": 1, "description": "RunTask calls allowed at once before launch_rate applies (default 20)."},
    "max_attempts": {"type": "integer", "minimum": 1, "description": "Attempts per ECS API call, with the SDK's adaptive retry (default 8)."},
    "stop_wait": {"type": "string", "description": "How long Terminate waits for a stopped task to reach STOPPED, as a Go duration (default 25s; the stop is requested either way)."},
    "pass_env": {"type": "array", "items": {"type": "string"}, "description": "More variables of the server's environment the plugin gets (AWS_* always are under agentenv serve)."}
  }
}`

// Config is the plugin's configuration; its keys are the schema's.
type Config struct {
	Region                   string                 `json:"region"`
	Cluster                  string                 `json:"cluster"`
	Subnets                  []string               `json:"subnets"`
	SecurityGroups           []string               `json:"security_groups"`
	AssignPublicIP           bool                   `json:"assign_public_ip"`
	PlatformVersion          string                 `json:"platform_version"`
	CapacityProviderStrategy []CapacityProvider     `json:"capacity_provider_strategy"`
	ExecutionRoleARN         string                 `json:"execution_role_arn"`
	TaskRoleARN              string                 `json:"task_role_arn"`
	LogGroup                 string                 `json:"log_group"`
	LogStreamPrefix          string                 `json:"log_stream_prefix"`
	FamilyPrefix             string                 `json:"family_prefix"`
	Envs                     map[string]EnvSettings `json:"envs"`
	EndpointURL              string                 `json:"endpoint_url"`
	LaunchRate               float64                `json:"launch_rate"`
	LaunchBurst              int                    `json:"launch_burst"`
	MaxAttempts              int                    `json:"max_attempts"`
	StopWait                 config.Duration        `json:"stop_wait"`
	PassEnv                  []string               `json:"pass_env"`
}

// CapacityProvider is one item of a capacity provider strategy.
type CapacityProvider struct {
	CapacityProvider string `json:"capacity_provider"`
	Weight           int32  `json:"weight"`
	Base             int32  `json:"base"`
}

// EnvSettings say how one env runs: an existing task definition, or what
// to register one from.
type EnvSettings struct {
	TaskDefinition string `json:"task_definition"`
	Container      string `json:"container"`
	Image          string `json:"image"`
	CPU            int    `json:"cpu"`
	Memory         int    `json:"memory"`
}

// DefaultConfig is the configuration before Configure.
func DefaultConfig() Config {
	return Config{
		Cluster: "default", LogStreamPrefix: "agentenv", FamilyPrefix: "agentenv-",
		LaunchRate: 10, LaunchBurst: 20, MaxAttempts: 8, StopWait: config.Duration(25 * time.Second),
	}
}

// defaultContainer is the container name of registered task definitions.
const defaultContainer = "env"

var familyRE = regexp.MustCompile(`^[A-Za-z0-9_-]{0,255}$`)

// check refuses what ECS would refuse later, with the setting's name.
func (c Config) check() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("sandbox-ecs config: "+format, args...)
	}
	if c.Cluster == "" {
		return fail("cluster is empty; name the ECS cluster the tasks run in")
	}
	if len(c.Subnets) == 0 {
		return fail(`subnets is empty: Fargate tasks (awsvpc networking) need at least one subnet, e.g. subnets=["subnet-0abc"] (see docs/ecs.md, setup)`)
	}
	for _, s := range append(append([]string{}, c.Subnets...), c.SecurityGroups...) {
		if strings.TrimSpace(s) == "" {
			return fail("subnets and security_groups must not hold empty names")
		}
	}
	for i, cp := range c.CapacityProviderStrategy {
		if cp.CapacityProvider == "" {
			return fail("capacity_provider_strategy[%d]: capacity_provider is empty", i)
		}
	}
	if !familyRE.MatchString(c.FamilyPrefix) {
		return fail("family_prefix %q: a task definition family has only letters, digits, '-' and '_'", c.FamilyPrefix)
	}
	if c.LaunchRate <= 0 || c.LaunchBurst < 1 {
		return fail("launch_rate must be above 0 and launch_burst at least 1 (got %g and %d)", c.LaunchRate, c.LaunchBurst)
	}
	if c.MaxAttempts < 1 {
		return fail("max_attempts must be at least 1, got %d", c.MaxAttempts)
	}
	if c.LogGroup != "" && c.ExecutionRoleARN == "" {
		// ECS refuses such a task definition; say so before any env is prepared.
		return fail("log_group is set but execution_role_arn is not: Fargate's awslogs driver writes logs with the task execution role")
	}
	for name, e := range c.Envs {
		if e.TaskDefinition != "" && (e.Image != "" || e.CPU != 0 || e.Memory != 0) {
			return fail("envs.%s: task_definition names an existing task definition, so image, cpu and memory cannot be set too (they are the task definition's)", name)
		}
	}
	for _, name := range c.PassEnv {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return fail("pass_env entry %q is not a variable name", name)
		}
	}
	return nil
}

// fargateSizes are Fargate's CPU units and the memory (MiB) each allows:
// from min to max in steps (0.25 vCPU: 512, 1024 or 2048 only).
var fargateSizes = []struct{ cpu, minMem, maxMem, step int }{
	{256, 512, 2048, 512},
	{512, 1024, 4096, 1024},
	{1024, 2048, 8192, 1024},
	{2048, 4096, 16384, 1024},
	{4096, 8192, 30720, 1024},
	{8192, 16384, 61440, 4096},
	{16384, 32768, 122880, 8192},
}

// fargateSize rounds a request up to the smallest size Fargate runs:
// cpu in units (1024 per vCPU), memory in MiB; 0 asks for the least.
func fargateSize(cpu, memory int) (int, int, error) {
	for _, s := range fargateSizes {
		if cpu > s.cpu {
			continue
		}
		for mem := s.minMem; mem <= s.maxMem; mem += s.step {
			if s.cpu == 256 && mem == 1536 {
				continue
			}
			if mem >= memory {
				return s.cpu, mem, nil
			}
		}
	}
	return 0, 0, fmt.Errorf("%d CPU units and %d MiB is more than one Fargate task can have (16 vCPU, 120 GiB)", cpu, memory)
}
