package ecs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsecs "github.com/aws/aws-sdk-go-v2/service/ecs"

	"github.com/agentenv/agentenv/plugins/sandbox-ecs/standin"
	"github.com/agentenv/agentenv/plugins/sandbox-ecs/standin/standintest"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

func TestConfigSchemaMatchesStruct(t *testing.T) {
	sdktest.ConfigSchemaMatches(t, New().Info().ConfigSchema, Config{})
	var schema struct {
		Properties map[string]struct {
			Items                struct{ Properties map[string]json.RawMessage } `json:"items"`
			AdditionalProperties struct{ Properties map[string]json.RawMessage } `json:"additionalProperties"`
		}
	}
	if err := json.Unmarshal([]byte(configSchema), &schema); err != nil {
		t.Fatal(err)
	}
	// The nested objects too: their keys are the structs'.
	sdktest.ConfigSchemaMatches(t, []byte(`{"type":"object","additionalProperties":false,"properties":`+
		mustJSON(schema.Properties["capacity_provider_strategy"].Items.Properties)+`}`), CapacityProvider{})
	sdktest.ConfigSchemaMatches(t, []byte(`{"type":"object","additionalProperties":false,"properties":`+
		mustJSON(schema.Properties["envs"].AdditionalProperties.Properties)+`}`), EnvSettings{})
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestConfigureRefuses(t *testing.T) {
	standintest.Credentials(t)
	cases := []struct{ name, cfg, want string }{
		{"nothing", `{}`, "subnets is empty"},
		{"unknown key", `{"subnets":["s"],"colour":"blue"}`, `unknown setting "colour"`},
		{"unknown env key", `{"subnets":["s"],"envs":{"web":{"imag":"x"}}}`, `unknown field "imag"`},
		{"duration as number", `{"subnets":["s"],"stop_wait":5}`, `write`},
		{"logs without a role", `{"subnets":["s"],"log_group":"/agentenv"}`, "execution_role_arn"},
		{"task definition and image", `{"subnets":["s"],"envs":{"web":{"task_definition":"web:3","image":"x"}}}`, "envs.web"},
		{"no launch rate", `{"subnets":["s"],"launch_rate":0}`, "launch_rate"},
		{"bad family prefix", `{"subnets":["s"],"family_prefix":"a b"}`, "family_prefix"},
		{"empty capacity provider", `{"subnets":["s"],"capacity_provider_strategy":[{"weight":1}]}`, "capacity_provider is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := New().Configure(context.Background(), json.RawMessage(tc.cfg))
			if err == nil || !strings.Contains(err.Error(), tc.want) && !(tc.want == "write" && strings.Contains(err.Error(), `"5s"`)) {
				t.Fatalf("Configure(%s) = %v, want an error with %q", tc.cfg, err, tc.want)
			}
		})
	}
	// An unconfigured plugin says what to set.
	if _, err := New().Deploy(context.Background(), spec("x", nil)); err == nil || !strings.Contains(err.Error(), "subnets") {
		t.Errorf("Deploy before Configure: %v", err)
	}
}

func TestFargateSize(t *testing.T) {
	cases := []struct{ cpu, mem, wantCPU, wantMem int }{
		{0, 0, 256, 512},
		{256, 64, 256, 512},
		{256, 600, 256, 1024},
		{256, 1500, 256, 2048},
		{256, 3000, 512, 3072},
		{300, 0, 512, 1024},
		{1024, 2500, 1024, 3072},
		{4096, 30720, 4096, 30720},
		{4096, 30721, 8192, 32768},
		{16384, 122880, 16384, 122880},
	}
	for _, tc := range cases {
		cpu, mem, err := fargateSize(tc.cpu, tc.mem)
		if err != nil || cpu != tc.wantCPU || mem != tc.wantMem {
			t.Errorf("fargateSize(%d, %d) = %d, %d, %v; want %d, %d", tc.cpu, tc.mem, cpu, mem, err, tc.wantCPU, tc.wantMem)
		}
	}
	if _, _, err := fargateSize(32768, 0); err == nil {
		t.Error("32 vCPU accepted")
	}
}

// labels are the labels the host puts on a deploy.
func labels(server, episode string) map[string]string {
	return map[string]string{sandbox.LabelServer: server, sandbox.LabelEpisode: episode,
		sandbox.LabelTask: "t/1", sandbox.LabelDeploy: "d-" + episode}
}

// The whole life of a task without Docker: deploy, endpoint, list, stop.
func TestDeployListTerminate(t *testing.T) {
	s := standintest.Start(t, nil, standin.Options{})
	p := newPlugin(t, s.URL, nil)
	ctx := context.Background()
	sp := spec("listener:1", labels("srv1", "ep1"))
	sp.EnvVars = map[string]string{"TOKEN": "s3cret-value"}
	sb, err := p.Deploy(ctx, sp)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(sb.Endpoint)
	if err != nil || !strings.HasPrefix(u.Hostname(), "127.") || u.Port() != fmt.Sprint(listenerPort) {
		t.Fatalf("endpoint %q: want the task's private IP and port %d", sb.Endpoint, listenerPort)
	}
	if live := s.Live(); len(live) != 1 || live[0].LastStatus != "RUNNING" || live[0].IP != u.Hostname() {
		t.Fatalf("stand-in tasks: %+v", live)
	}
	if strings.Contains(string(sb.State), "s3cret") || strings.Contains(fmt.Sprint(sb.Labels), "s3cret") {
		t.Fatalf("the handle holds an env variable's value: %+v", sb)
	}
	got, err := p.List(ctx, map[string]string{sandbox.LabelServer: "srv1"})
	if err != nil || len(got) != 1 || got[0].ID != sb.ID || got[0].Labels[sandbox.LabelEpisode] != "ep1" {
		t.Fatalf("List by server = %+v, %v", got, err)
	}
	if got, _ := p.List(ctx, map[string]string{sandbox.LabelServer: "srv2"}); len(got) != 0 {
		t.Fatalf("List of another server = %+v", got)
	}
	if got, _ := p.List(ctx, map[string]string{sandbox.LabelDeploy: "d-ep1"}); len(got) != 1 {
		t.Fatalf("List by deploy label (no server label: the whole cluster) = %+v", got)
	}
	if err := p.Terminate(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if live := s.Live(); len(live) != 0 {
		t.Fatalf("live after Terminate: %+v", live)
	}
	if err := p.Terminate(ctx, sb); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("second Terminate: %v, want ErrNotFound", err)
	}
	calls := s.Calls()
	if calls["RegisterTaskDefinition"] != 1 || calls["RunTask"] != 1 || calls["StopTask"] != 1 {
		t.Errorf("calls: %v", calls)
	}
}

// Each injected fault is an error that names its cause, and leaves no task
// running.
func TestFaultsAreClearErrors(t *testing.T) {
	cases := []struct {
		name  string
		fault standin.Faults
		extra map[string]any
		want  []string
	}{
		{"no Fargate capacity", standin.Faults{Capacity: 1}, nil,
			[]string{`env "listener"`, "ECS placed no task", standin.CapacityReason}},
		{"stopped before RUNNING", standin.Faults{StopBeforeRunning: 1}, nil,
			[]string{`env "listener"`, "stopped before RUNNING", "CannotPullContainerError", "stop code TaskFailedToStart"}},
		{"stopped with a reason of the test's", standin.Faults{StopBeforeRunning: 1, StopReason: "ResourceInitializationError: unable to pull secrets or registry auth"}, nil,
			[]string{"stopped before RUNNING", "ResourceInitializationError: unable to pull secrets"}},
		{"throttled past max_attempts", standin.Faults{Throttle: 10, ThrottleOp: "RunTask"}, map[string]any{"max_attempts": 3},
			[]string{"RunTask in cluster default", "ThrottlingException", "Rate exceeded", "maximum number of attempts, 3", "lower launch_rate"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := standintest.Start(t, nil, standin.Options{})
			p := newPlugin(t, s.URL, tc.extra)
			s.Inject(tc.fault)
			_, err := p.Deploy(context.Background(), spec("listener:1", labels("srv", "ep")))
			if err == nil {
				t.Fatal("Deploy succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			if live := s.Live(); len(live) != 0 {
				t.Errorf("tasks left running after the failed deploy: %+v", live)
			}
		})
	}
}

// Throttling within max_attempts is retried by the SDK; a reply lost after
// RunTask started the task is retried with the same client token, which
// gets the same task back: one task per deploy either way.
func TestRetriesStartOneTask(t *testing.T) {
	s := standintest.Start(t, nil, standin.Options{})
	p := newPlugin(t, s.URL, nil)
	s.Inject(standin.Faults{Throttle: 2, ThrottleOp: "RunTask", LoseRunTaskReply: 1})
	sb, err := p.Deploy(context.Background(), spec("listener:1", labels("srv", "ep")))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Terminate(context.Background(), sb)
	if n := len(s.Tasks()); n != 1 {
		t.Fatalf("%d tasks for one deploy retried twice", n)
	}
	if c := s.Calls()["RunTask"]; c != 4 {
		t.Errorf("RunTask called %d times; want 4 (2 throttled, 1 lost, 1 answered)", c)
	}
}

// A task that does not reach RUNNING within the deploy deadline is stopped.
func TestDeployDeadlineStopsTheTask(t *testing.T) {
	s := standintest.Start(t, nil, standin.Options{Pending: time.Minute})
	p := newPlugin(t, s.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := p.Deploy(ctx, spec("listener:1", labels("srv", "ep")))
	if err == nil || !strings.Contains(err.Error(), "not RUNNING within the deploy deadline (last status PENDING)") {
		t.Fatalf("Deploy = %v", err)
	}
	wait.For(t, "the task to stop after the deadline", func() error {
		if live := s.Live(); len(live) != 0 {
			return fmt.Errorf("live: %+v", live)
		}
		return nil
	})
	if r := s.Tasks()[0].StoppedReason; r != "agentenv: deploy failed" {
		t.Errorf("stopped reason %q", r)
	}
}

// The task definition is registered once per settings: a restarted plugin
// reuses the family's revision; a new image registers a new one.
func TestTaskDefinitionRegisteredOnce(t *testing.T) {
	s := standintest.Start(t, nil, standin.Options{})
	ctx := context.Background()
	for range 2 {
		if err := newPlugin(t, s.URL, nil).Prepare(ctx, spec("listener:1", nil)); err != nil {
			t.Fatal(err)
		}
	}
	if c := s.Calls()["RegisterTaskDefinition"]; c != 1 {
		t.Fatalf("registered %d times for the same settings", c)
	}
	p := newPlugin(t, s.URL, map[string]any{"envs": map[string]any{"listener": map[string]any{"image": "listener:2", "cpu": 1024, "memory": 4096}}})
	if err := p.Prepare(ctx, spec("listener:1", nil)); err != nil {
		t.Fatal(err)
	}
	if c := s.Calls()["RegisterTaskDefinition"]; c != 2 {
		t.Fatalf("a new image registered %d revisions in all, want 2", c)
	}
	td := p.taskDefs[prepareKey(spec("listener:1", nil))]
	if !strings.HasSuffix(td.arn, ":task-definition/agentenv-listener:2") {
		t.Errorf("task definition %s", td.arn)
	}
}

// An existing task definition is checked before any task runs.
func TestExistingTaskDefinitionChecked(t *testing.T) {
	s := standintest.Start(t, nil, standin.Options{})
	ctx := context.Background()
	// Register "web" (port 9000) through the plugin under another env.
	reg := newPlugin(t, s.URL, map[string]any{"family_prefix": ""})
	if err := reg.Prepare(ctx, sandbox.Spec{Env: "web", Image: "web:1", Port: 9000}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		settings map[string]any
		want     string
	}{
		{map[string]any{"task_definition": "web:1"}, `container "env" does not map port 18080`},
		{map[string]any{"task_definition": "web:1", "container": "app"}, `has no container "app"`},
		{map[string]any{"task_definition": "nope:1"}, "Unable to describe task definition"},
	}
	for _, tc := range cases {
		p := newPlugin(t, s.URL, map[string]any{"envs": map[string]any{"listener": tc.settings}})
		err := p.Prepare(ctx, spec("listener:1", nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Prepare with %v = %v, want %q", tc.settings, err, tc.want)
		}
	}
	p := newPlugin(t, s.URL, map[string]any{"envs": map[string]any{"listener": map[string]any{"task_definition": "web"}}})
	sb, err := p.Deploy(ctx, sandbox.Spec{Env: "listener", Port: 9000, Labels: labels("srv", "ep")})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Terminate(ctx, sb); err != nil {
		t.Fatal(err)
	}
}

// A plugin process that died leaves its tasks; a new one lists them by the
// server label and terminates them through the handles List returns.
func TestReapAfterRestart(t *testing.T) {
	s := standintest.Start(t, nil, standin.Options{})
	ctx := context.Background()
	first := newPlugin(t, s.URL, nil)
	for i := range 3 {
		if _, err := first.Deploy(ctx, spec("listener:1", labels("srv-a", fmt.Sprint("ep", i)))); err != nil {
			t.Fatal(err)
		}
	}
	other, err := first.Deploy(ctx, spec("listener:1", labels("srv-b", "ep9")))
	if err != nil {
		t.Fatal(err)
	}
	again := newPlugin(t, s.URL, nil)
	left, err := again.List(ctx, map[string]string{sandbox.LabelServer: "srv-a"})
	if err != nil || len(left) != 3 {
		t.Fatalf("List after restart: %d, %v", len(left), err)
	}
	for _, sb := range left {
		if err := again.Terminate(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	if live := s.Live(); len(live) != 1 {
		t.Fatalf("live after reaping server srv-a: %+v; want srv-b's task only", live)
	}
	if err := again.Terminate(ctx, other); err != nil {
		t.Fatal(err)
	}
}

func TestTagsOf(t *testing.T) {
	if _, err := tagsOf(map[string]string{"k": "a\x00b"}, "id"); err == nil || !strings.Contains(err.Error(), "cannot be an ECS tag") {
		t.Errorf("bad value: %v", err)
	}
	if _, err := tagsOf(map[string]string{"aws:x": "y"}, "id"); err == nil {
		t.Error("aws: prefix accepted")
	}
	if _, err := tagsOf(map[string]string{tagSandbox: "y"}, "id"); err == nil {
		t.Error("the plugin's own tag accepted as a label")
	}
	tags, err := tagsOf(map[string]string{"agentenv.episode": "ep/1"}, "ecs-1")
	if err != nil {
		t.Fatal(err)
	}
	got, id := labelsOf(tags)
	if id != "ecs-1" || len(got) != 1 || got["agentenv.episode"] != "ep/1" {
		t.Errorf("labelsOf(tagsOf) = %v, %q", got, id)
	}
	if sb := startedBy(map[string]string{sandbox.LabelServer: "a b:c"}); sb != "agentenv-a-b-c" {
		t.Errorf("startedBy = %q", sb)
	}
}

func TestClientToken(t *testing.T) {
	l := labels("srv", "ep")
	if clientToken(l) != clientToken(l) {
		t.Error("the same deploy got two tokens")
	}
	other := labels("srv", "ep")
	other[sandbox.LabelDeploy] = "d-2"
	if clientToken(l) == clientToken(other) {
		t.Error("two deploys share a token")
	}
	if clientToken(nil) == clientToken(nil) || len(clientToken(nil)) > 64 {
		t.Error("deploys without a deploy label must get fresh tokens of at most 64 characters")
	}
}

func TestExecUnsupported(t *testing.T) {
	_, err := New().Exec(context.Background(), sandbox.Sandbox{ID: "ecs-x"}, []string{"true"})
	if !errors.Is(err, sandbox.ErrExecUnsupported) || !strings.Contains(err.Error(), "ecs-x") {
		t.Errorf("Exec = %v", err)
	}
}

// A capacity provider strategy replaces the FARGATE launch type, and the
// platform version is passed on; a provider the cluster lacks is ECS's
// error.
func TestCapacityProvidersAndPlatform(t *testing.T) {
	s := standintest.Start(t, nil, standin.Options{})
	p := newPlugin(t, s.URL, map[string]any{"platform_version": "1.4.0",
		"capacity_provider_strategy": []map[string]any{{"capacity_provider": "FARGATE_SPOT", "weight": 3}, {"capacity_provider": "FARGATE", "weight": 1, "base": 1}}})
	sb, err := p.Deploy(context.Background(), spec("listener:1", labels("srv", "ep")))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := decodeState(sb)
	setup, _ := p.setup()
	task, err := describeTask(context.Background(), setup.api, st)
	if err != nil || aws.ToString(task.CapacityProviderName) != "FARGATE_SPOT" || task.LaunchType != "" || aws.ToString(task.PlatformVersion) != "1.4.0" {
		t.Errorf("task: capacity provider %q, launch type %q, platform %q, %v; want FARGATE_SPOT, none, 1.4.0",
			aws.ToString(task.CapacityProviderName), task.LaunchType, aws.ToString(task.PlatformVersion), err)
	}
	if err := p.Terminate(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	bad := newPlugin(t, s.URL, map[string]any{"capacity_provider_strategy": []map[string]any{{"capacity_provider": "MY_ASG"}}})
	_, err = bad.Deploy(context.Background(), spec("listener:1", labels("srv", "ep2")))
	if err == nil || !strings.Contains(err.Error(), "InvalidParameterException") || !strings.Contains(err.Error(), "capacity provider") {
		t.Fatalf("Deploy with an unknown capacity provider: %v", err)
	}
}

// With log_group, registered task definitions log through awslogs with the
// execution role, and a task that fails says where its output is.
func TestLogsOfAFailedTask(t *testing.T) {
	s := standintest.Start(t, nil, standin.Options{})
	p := newPlugin(t, s.URL, map[string]any{"log_group": "/agentenv/envs",
		"execution_role_arn": "arn:aws:iam::000000000000:role/agentenv-task-execution"})
	s.Inject(standin.Faults{StopBeforeRunning: 1})
	_, err := p.Deploy(context.Background(), spec("listener:1", labels("srv", "ep")))
	if err == nil || !strings.Contains(err.Error(), "its output is in CloudWatch Logs, group /agentenv/envs, stream agentenv/env/") {
		t.Fatalf("Deploy = %v, want where the logs are", err)
	}
	td := p.taskDefs[prepareKey(spec("listener:1", nil))]
	out, derr := p.cur.api.DescribeTaskDefinition(context.Background(), &awsecs.DescribeTaskDefinitionInput{TaskDefinition: aws.String(td.arn)})
	if derr != nil {
		t.Fatal(derr)
	}
	c := out.TaskDefinition.ContainerDefinitions[0]
	if aws.ToString(out.TaskDefinition.ExecutionRoleArn) == "" || c.LogConfiguration == nil ||
		c.LogConfiguration.Options["awslogs-group"] != "/agentenv/envs" || c.LogConfiguration.Options["awslogs-region"] != "us-east-1" {
		t.Errorf("registered task definition: role %q, logs %+v", aws.ToString(out.TaskDefinition.ExecutionRoleArn), c.LogConfiguration)
	}
}

func TestHarborTaskRefused(t *testing.T) {
	p := New()
	s := spec("task:1", nil)
	s.Terminal = &sandbox.Terminal{Workdir: "/app"}
	for name, call := range map[string]func() error{
		"Prepare": func() error { return p.Prepare(context.Background(), s) },
		"Deploy": func() error {
			_, err := p.Deploy(context.Background(), s)
			return err
		},
	} {
		err := call()
		if err == nil || !strings.Contains(err.Error(), "--sandbox local") || !strings.Contains(err.Error(), "Harbor") {
			t.Errorf("%s: %v, want a refusal naming the sandboxes that can run it", name, err)
		}
	}
}
