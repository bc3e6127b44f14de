package standin

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

type handler func(ctx context.Context, body []byte) (any, error)

func (s *Server) ops() map[string]handler {
	return map[string]handler{
		"RegisterTaskDefinition": s.registerTaskDefinition,
		"DescribeTaskDefinition": s.describeTaskDefinition,
		"RunTask":                s.runTask,
		"DescribeTasks":          s.describeTasks,
		"ListTasks":              s.listTasks,
		"StopTask":               s.stopTask,
	}
}

// decode reads a request strictly: a field ECS does not have is a
// SerializationException naming it, so a misspelt request fails here.
func decode(body []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &apiError{400, "SerializationException", err.Error()}
	}
	return nil
}

var (
	familyRE    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
	startedByRE = regexp.MustCompile(`^[A-Za-z0-9_/-]{0,128}$`)
	tagRE       = regexp.MustCompile(`^[\p{L}\p{Z}\p{N}_.:/=+\-@]*$`)
)

// fargateMemory lists the memory (MiB) each Fargate CPU size allows.
func fargateMemory(cpu int) []int {
	span := func(lo, hi, step int) []int {
		var out []int
		for m := lo; m <= hi; m += step {
			out = append(out, m)
		}
		return out
	}
	switch cpu {
	case 256:
		return []int{512, 1024, 2048}
	case 512:
		return span(1024, 4096, 1024)
	case 1024:
		return span(2048, 8192, 1024)
	case 2048:
		return span(4096, 16384, 1024)
	case 4096:
		return span(8192, 30720, 1024)
	case 8192:
		return span(16384, 61440, 4096)
	case 16384:
		return span(32768, 122880, 8192)
	}
	return nil
}

func checkTags(tags []tag) error {
	if len(tags) > 50 {
		return invalidParameter("Tags: at most 50 tags are allowed, got %d", len(tags))
	}
	for _, t := range tags {
		if len(t.Key) < 1 || len(t.Key) > 128 || len(t.Value) > 256 || !tagRE.MatchString(t.Key) || !tagRE.MatchString(t.Value) {
			return invalidParameter("The following supplied tag is invalid: %s=%s", t.Key, t.Value)
		}
		if strings.HasPrefix(strings.ToLower(t.Key), "aws:") {
			return invalidParameter("Tag keys beginning with 'aws:' are reserved: %s", t.Key)
		}
	}
	return nil
}

func (s *Server) registerTaskDefinition(_ context.Context, body []byte) (any, error) {
	var in struct {
		Family                  string                `json:"family"`
		NetworkMode             string                `json:"networkMode"`
		RequiresCompatibilities []string              `json:"requiresCompatibilities"`
		Cpu                     string                `json:"cpu"`
		Memory                  string                `json:"memory"`
		ExecutionRoleArn        string                `json:"executionRoleArn"`
		TaskRoleArn             string                `json:"taskRoleArn"`
		ContainerDefinitions    []containerDefinition `json:"containerDefinitions"`
		Tags                    []tag                 `json:"tags"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if !familyRE.MatchString(in.Family) {
		return nil, clientError("Family contains invalid characters or is empty: %q", in.Family)
	}
	if len(in.ContainerDefinitions) == 0 {
		return nil, clientError("Container list cannot be empty.")
	}
	for _, c := range in.ContainerDefinitions {
		if c.Name == "" || c.Image == "" {
			return nil, clientError("Container.name and Container.image should not be null or empty.")
		}
		if c.LogConfiguration != nil && c.LogConfiguration.LogDriver == "awslogs" && in.ExecutionRoleArn == "" && slices.Contains(in.RequiresCompatibilities, "FARGATE") {
			return nil, clientError("Fargate requires task definition to have execution role ARN to support log driver awslogs.")
		}
	}
	if slices.Contains(in.RequiresCompatibilities, "FARGATE") {
		if in.NetworkMode != "awsvpc" {
			return nil, clientError("Fargate only supports network mode ‘awsvpc’.")
		}
		cpu, _ := strconv.Atoi(in.Cpu)
		mem, _ := strconv.Atoi(in.Memory)
		if !slices.Contains(fargateMemory(cpu), mem) {
			return nil, clientError("No Fargate configuration exists for given values: %s CPU, %s memory. See the Amazon ECS documentation for the valid values.", in.Cpu, in.Memory)
		}
	}
	if err := checkTags(in.Tags); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	revs := s.taskDefs[in.Family]
	td := &taskDefinition{
		Family: in.Family, Revision: len(revs) + 1, Status: "ACTIVE", NetworkMode: in.NetworkMode,
		RequiresCompatibilities: in.RequiresCompatibilities, Compatibilities: []string{"EC2", "FARGATE"},
		Cpu: in.Cpu, Memory: in.Memory, ExecutionRoleArn: in.ExecutionRoleArn, TaskRoleArn: in.TaskRoleArn,
		ContainerDefinitions: in.ContainerDefinitions, RegisteredAt: epoch(time.Now()),
	}
	td.TaskDefinitionArn = fmt.Sprintf("arn:aws:ecs:%s:%s:task-definition/%s:%d", s.opts.Region, s.opts.Account, td.Family, td.Revision)
	s.taskDefs[in.Family] = append(revs, td)
	s.tdTags[td.TaskDefinitionArn] = in.Tags
	return map[string]any{"taskDefinition": td, "tags": in.Tags}, nil
}

// lookupTaskDef finds family, family:revision or an ARN; call with s.mu held.
func (s *Server) lookupTaskDef(ref string) *taskDefinition {
	if _, after, ok := strings.Cut(ref, ":task-definition/"); ok {
		ref = after
	}
	family, rev, hasRev := strings.Cut(ref, ":")
	revs := s.taskDefs[family]
	if !hasRev {
		for i := len(revs) - 1; i >= 0; i-- {
			if revs[i].Status == "ACTIVE" {
				return revs[i]
			}
		}
		return nil
	}
	n, err := strconv.Atoi(rev)
	if err != nil || n < 1 || n > len(revs) {
		return nil
	}
	return revs[n-1]
}

func (s *Server) describeTaskDefinition(_ context.Context, body []byte) (any, error) {
	var in struct {
		TaskDefinition string   `json:"taskDefinition"`
		Include        []string `json:"include"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	td := s.lookupTaskDef(in.TaskDefinition)
	if td == nil {
		return nil, clientError("Unable to describe task definition.")
	}
	out := map[string]any{"taskDefinition": td}
	if slices.Contains(in.Include, "TAGS") {
		out["tags"] = s.tdTags[td.TaskDefinitionArn]
	}
	return out, nil
}

// clusterARN resolves a cluster name or ARN; call with s.mu held.
func (s *Server) clusterARN(ref string) (string, error) {
	if ref == "" {
		ref = "default"
	}
	if _, after, ok := strings.Cut(ref, ":cluster/"); ok {
		ref = after
	}
	if !s.clusters[ref] {
		return "", errClusterNotFound
	}
	return fmt.Sprintf("arn:aws:ecs:%s:%s:cluster/%s", s.opts.Region, s.opts.Account, ref), nil
}

type runTaskInput struct {
	Cluster                  string `json:"cluster"`
	TaskDefinition           string `json:"taskDefinition"`
	Count                    *int   `json:"count"`
	LaunchType               string `json:"launchType"`
	CapacityProviderStrategy []struct {
		CapacityProvider string `json:"capacityProvider"`
		Weight           int    `json:"weight"`
		Base             int    `json:"base"`
	} `json:"capacityProviderStrategy"`
	PlatformVersion      string `json:"platformVersion"`
	ClientToken          string `json:"clientToken"`
	StartedBy            string `json:"startedBy"`
	Group                string `json:"group"`
	NetworkConfiguration *struct {
		AwsvpcConfiguration *struct {
			Subnets        []string `json:"subnets"`
			SecurityGroups []string `json:"securityGroups"`
			AssignPublicIp string   `json:"assignPublicIp"`
		} `json:"awsvpcConfiguration"`
	} `json:"networkConfiguration"`
	Overrides            *taskOverride `json:"overrides"`
	Tags                 []tag         `json:"tags"`
	PropagateTags        string        `json:"propagateTags"`
	EnableECSManagedTags bool          `json:"enableECSManagedTags"`
	EnableExecuteCommand bool          `json:"enableExecuteCommand"`
}

// checkRunTask refuses what ECS refuses; call with s.mu held.
func (s *Server) checkRunTask(in *runTaskInput) (*taskDefinition, int, error) {
	count := 1
	if in.Count != nil {
		count = *in.Count
	}
	switch {
	case count < 1 || count > 10:
		return nil, 0, invalidParameter("Count must be between 1 and 10.")
	case in.LaunchType != "" && len(in.CapacityProviderStrategy) > 0:
		return nil, 0, invalidParameter("Specifying both a launch type and capacity provider strategy is not supported. Remove one and try again.")
	case in.LaunchType != "" && in.LaunchType != "FARGATE":
		return nil, 0, invalidParameter("The stand-in runs Fargate tasks only; launch type %s is not supported.", in.LaunchType)
	case len(in.ClientToken) > 64:
		return nil, 0, invalidParameter("clientToken must be at most 64 characters.")
	case !startedByRE.MatchString(in.StartedBy):
		return nil, 0, invalidParameter("startedBy may contain up to 128 letters, numbers, hyphens, forward slashes and underscores.")
	}
	for _, cp := range in.CapacityProviderStrategy {
		if cp.CapacityProvider != "FARGATE" && cp.CapacityProvider != "FARGATE_SPOT" {
			return nil, 0, invalidParameter("The specified capacity provider strategy cannot contain a capacity provider that is not associated with the cluster. Associate the capacity provider with the cluster or specify a valid capacity provider and try again.")
		}
	}
	if err := checkTags(in.Tags); err != nil {
		return nil, 0, err
	}
	td := s.lookupTaskDef(in.TaskDefinition)
	if td == nil || td.Status != "ACTIVE" {
		return nil, 0, invalidParameter("TaskDefinition not found.")
	}
	if !slices.Contains(td.RequiresCompatibilities, "FARGATE") {
		return nil, 0, invalidParameter("Task definition does not support launch_type FARGATE.")
	}
	if td.NetworkMode == "awsvpc" {
		nc := in.NetworkConfiguration
		if nc == nil || nc.AwsvpcConfiguration == nil {
			return nil, 0, invalidParameter("Network Configuration must be provided when networkMode 'awsvpc' is specified.")
		}
		if n := len(nc.AwsvpcConfiguration.Subnets); n < 1 || n > 16 {
			return nil, 0, invalidParameter("subnets can not be empty.")
		}
	}
	if in.Overrides != nil {
		for _, o := range in.Overrides.ContainerOverrides {
			if !slices.ContainsFunc(td.ContainerDefinitions, func(c containerDefinition) bool { return c.Name == o.Name }) {
				return nil, 0, invalidParameter("Override for container named %s is not a container in the TaskDefinition.", o.Name)
			}
		}
	}
	return td, count, nil
}

func (s *Server) runTask(_ context.Context, body []byte) (any, error) {
	var in runTaskInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, &apiError{503, "ServerException", "the stand-in is closing"}
	}
	if s.throttle != nil && !s.throttle.Allow() {
		return nil, errThrottled
	}
	cluster, err := s.clusterARN(in.Cluster)
	if err != nil {
		return nil, err
	}
	if arns, ok := s.tokens[in.ClientToken]; ok && in.ClientToken != "" {
		return map[string]any{"tasks": s.snapshot(arns, true), "failures": []failure{}}, nil
	}
	td, count, err := s.checkRunTask(&in)
	if err != nil {
		return nil, err
	}
	s.runTimes = append(s.runTimes, time.Now())
	if s.faults.Capacity > 0 {
		s.faults.Capacity--
		return map[string]any{"tasks": []task{}, "failures": []failure{{Reason: CapacityReason}}}, nil
	}
	var arns []string
	for range count {
		lt, err := s.newTask(cluster, td, &in)
		if err != nil {
			return map[string]any{"tasks": s.snapshot(arns, true), "failures": []failure{{Reason: "RESOURCE:ENI", Detail: err.Error()}}}, nil
		}
		arns = append(arns, lt.t.TaskArn)
		s.wg.Add(1)
		go s.run(lt)
	}
	if in.ClientToken != "" {
		s.tokens[in.ClientToken] = arns
	}
	if s.faults.LoseRunTaskReply > 0 {
		s.faults.LoseRunTaskReply--
		return nil, errLostReply
	}
	return map[string]any{"tasks": s.snapshot(arns, true), "failures": []failure{}}, nil
}

// newTask creates a task in PROVISIONING; call with s.mu held.
func (s *Server) newTask(clusterARN string, td *taskDefinition, in *runTaskInput) (*liveTask, error) {
	c := td.ContainerDefinitions[0]
	var ports []int
	for _, pm := range c.PortMappings {
		ports = append(ports, pm.ContainerPort)
	}
	ip, err := s.ips.take(ports)
	if err != nil {
		return nil, err
	}
	id := newID()
	clusterName := clusterARN[strings.LastIndex(clusterARN, "/")+1:]
	arn := fmt.Sprintf("arn:aws:ecs:%s:%s:task/%s/%s", s.opts.Region, s.opts.Account, clusterName, id)
	env := map[string]string{}
	for _, kv := range c.Environment {
		env[kv.Name] = kv.Value
	}
	cmd := c.Command
	overrides := taskOverride{}
	if in.Overrides != nil {
		overrides = *in.Overrides
		for _, o := range in.Overrides.ContainerOverrides {
			if o.Name != c.Name {
				continue
			}
			for _, kv := range o.Environment {
				env[kv.Name] = kv.Value
			}
			if len(o.Command) > 0 {
				cmd = o.Command
			}
		}
	}
	var envList []string
	for _, k := range sortedKeys(env) {
		envList = append(envList, k+"="+env[k])
	}
	subnet := ""
	if nc := in.NetworkConfiguration; nc != nil && nc.AwsvpcConfiguration != nil && len(nc.AwsvpcConfiguration.Subnets) > 0 {
		subnet = nc.AwsvpcConfiguration.Subnets[0]
	}
	attach := newID()
	eni := attachment{ID: attach, Type: "ElasticNetworkInterface", Status: "PRECREATED", Details: []attachmentDetail{
		{Name: "subnetId", Value: subnet},
		{Name: "networkInterfaceId", Value: "eni-" + id[:17]},
		{Name: "macAddress", Value: "02:00:00:00:00:01"},
		{Name: "privateDnsName", Value: "ip-" + strings.ReplaceAll(ip.String(), ".", "-") + ".ec2.internal"},
		{Name: "privateIPv4Address", Value: ip.String()},
	}}
	t := task{
		TaskArn: arn, ClusterArn: clusterARN, TaskDefinitionArn: td.TaskDefinitionArn,
		LastStatus: "PROVISIONING", DesiredStatus: "RUNNING", PlatformVersion: "1.4.0",
		StartedBy: in.StartedBy, Cpu: td.Cpu, Memory: td.Memory, Connectivity: "CONNECTED",
		Attachments: []attachment{eni}, Overrides: overrides, Tags: in.Tags, CreatedAt: epoch(time.Now()), Version: 1,
		Containers: []container{{ContainerArn: fmt.Sprintf("arn:aws:ecs:%s:%s:container/%s/%s/%s", s.opts.Region, s.opts.Account, clusterName, id, newID()),
			TaskArn: arn, Name: c.Name, Image: c.Image, LastStatus: "PENDING",
			NetworkInterfaces: []networkInterface{{AttachmentID: attach, PrivateIpv4Address: ip.String()}}}},
	}
	if len(in.CapacityProviderStrategy) > 0 {
		t.CapacityProvider = in.CapacityProviderStrategy[0].CapacityProvider
	} else {
		t.LaunchType = "FARGATE"
	}
	if in.PlatformVersion != "" && in.PlatformVersion != "LATEST" {
		t.PlatformVersion = in.PlatformVersion
	}
	lt := &liveTask{t: t, ip: ip, stop: make(chan struct{}),
		spec: RunSpec{Task: id, Name: c.Name, Image: c.Image, Command: cmd, Env: envList, IP: ip, Ports: ports}}
	if s.faults.StopBeforeRunning > 0 {
		s.faults.StopBeforeRunning--
		lt.failStart = s.faults.StopReason
		if lt.failStart == "" {
			lt.failStart = DefaultStopReason
		}
	}
	s.tasks[arn] = lt
	s.order = append(s.order, arn)
	return lt, nil
}

// snapshot copies tasks for a reply; call with s.mu held.
func (s *Server) snapshot(arns []string, withTags bool) []task {
	out := make([]task, 0, len(arns))
	for _, arn := range arns {
		t := s.tasks[arn].t
		t.Attachments = slices.Clone(t.Attachments)
		t.Containers = slices.Clone(t.Containers)
		if !withTags {
			t.Tags = nil
		}
		out = append(out, t)
	}
	return out
}

// findTask resolves a task id or ARN in a cluster; call with s.mu held.
func (s *Server) findTask(clusterARN, ref string) *liveTask {
	if lt, ok := s.tasks[ref]; ok && lt.t.ClusterArn == clusterARN {
		return lt
	}
	clusterName := clusterARN[strings.LastIndex(clusterARN, "/")+1:]
	arn := fmt.Sprintf("arn:aws:ecs:%s:%s:task/%s/%s", s.opts.Region, s.opts.Account, clusterName, ref)
	return s.tasks[arn]
}

func (s *Server) describeTasks(_ context.Context, body []byte) (any, error) {
	var in struct {
		Cluster string   `json:"cluster"`
		Tasks   []string `json:"tasks"`
		Include []string `json:"include"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if len(in.Tasks) == 0 || len(in.Tasks) > 100 {
		return nil, invalidParameter("Tasks cannot be empty and can have at most 100 items.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cluster, err := s.clusterARN(in.Cluster)
	if err != nil {
		return nil, err
	}
	var arns []string
	failures := []failure{}
	for _, ref := range in.Tasks {
		if lt := s.findTask(cluster, ref); lt != nil {
			arns = append(arns, lt.t.TaskArn)
		} else {
			failures = append(failures, failure{Arn: ref, Reason: "MISSING"})
		}
	}
	// ECS returns tags only when asked to.
	return map[string]any{"tasks": s.snapshot(arns, slices.Contains(in.Include, "TAGS")), "failures": failures}, nil
}

func (s *Server) listTasks(_ context.Context, body []byte) (any, error) {
	var in struct {
		Cluster       string `json:"cluster"`
		StartedBy     string `json:"startedBy"`
		DesiredStatus string `json:"desiredStatus"`
		Family        string `json:"family"`
		LaunchType    string `json:"launchType"`
		MaxResults    *int   `json:"maxResults"`
		NextToken     string `json:"nextToken"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	desired := in.DesiredStatus
	if desired == "" {
		desired = "RUNNING"
	}
	if desired != "RUNNING" && desired != "STOPPED" && desired != "PENDING" {
		return nil, invalidParameter("desiredStatus must be RUNNING, PENDING or STOPPED.")
	}
	limit := 100
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > 100 {
			return nil, invalidParameter("maxResults must be between 1 and 100.")
		}
		limit = *in.MaxResults
	}
	start := 0
	if in.NextToken != "" {
		n, err := strconv.Atoi(in.NextToken)
		if err != nil || n < 0 {
			return nil, invalidParameter("Invalid nextToken.")
		}
		start = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cluster, err := s.clusterARN(in.Cluster)
	if err != nil {
		return nil, err
	}
	var match []string
	for _, arn := range s.order {
		t := s.tasks[arn].t
		if t.ClusterArn != cluster || in.StartedBy != "" && t.StartedBy != in.StartedBy ||
			in.Family != "" && !strings.Contains(t.TaskDefinitionArn, ":task-definition/"+in.Family+":") {
			continue
		}
		// RUNNING lists the tasks meant to run (PROVISIONING and PENDING
		// too); STOPPED those told to stop.
		if (desired == "STOPPED") != (t.DesiredStatus == "STOPPED") {
			continue
		}
		match = append(match, arn)
	}
	out := map[string]any{"taskArns": []string{}}
	if start < len(match) {
		end := min(start+limit, len(match))
		out["taskArns"] = match[start:end]
		if end < len(match) {
			out["nextToken"] = strconv.Itoa(end)
		}
	}
	return out, nil
}

func (s *Server) stopTask(_ context.Context, body []byte) (any, error) {
	var in struct {
		Cluster string `json:"cluster"`
		Task    string `json:"task"`
		Reason  string `json:"reason"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if len(in.Reason) > 255 {
		return nil, invalidParameter("reason must be at most 255 characters.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cluster, err := s.clusterARN(in.Cluster)
	if err != nil {
		return nil, err
	}
	lt := s.findTask(cluster, in.Task)
	if lt == nil {
		return nil, invalidParameter("The referenced task was not found.")
	}
	reason := in.Reason
	if reason == "" {
		reason = "Task stopped by user"
	}
	lt.requestStop(reason, "UserInitiated")
	return map[string]any{"task": s.snapshot([]string{lt.t.TaskArn}, false)[0]}, nil
}
