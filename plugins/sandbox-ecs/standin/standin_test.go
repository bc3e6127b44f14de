package standin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"
)

// call posts one ECS operation as the SDK does and decodes the reply.
func call(t *testing.T, url, op, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("X-Amz-Target", targetPrefix+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s: reply is not JSON: %v", op, err)
	}
	return resp.StatusCode, out
}

const fargateDef = `{"family":"web","networkMode":"awsvpc","requiresCompatibilities":["FARGATE"],"cpu":"256","memory":"512",
 "containerDefinitions":[{"name":"env","image":"web:1","portMappings":[{"containerPort":8080}]}]}`

const runWeb = `{"cluster":"default","taskDefinition":"web","launchType":"FARGATE","startedBy":"me","clientToken":"tok-1",
 "networkConfiguration":{"awsvpcConfiguration":{"subnets":["subnet-1"]}},"tags":[{"key":"k","value":"v"}]}`

// ECS's error replies: status, __type and message, for the requests ECS
// refuses.
func TestErrorsAreECSs(t *testing.T) {
	s := New(Options{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	defer s.Close(context.Background())
	if code, out := call(t, srv.URL, "RegisterTaskDefinition", fargateDef); code != 200 {
		t.Fatalf("register: %d %v", code, out)
	}
	cases := []struct {
		op, body string
		status   int
		typ, msg string
	}{
		{"RunTask", `{"cluster":"nope","taskDefinition":"web"}`, 400, "ClusterNotFoundException", "Cluster not found."},
		{"RunTask", `{"taskDefinition":"web","launchType":"FARGATE"}`, 400, "InvalidParameterException", "Network Configuration must be provided"},
		{"RunTask", `{"taskDefinition":"web","launchType":"FARGATE","capacityProviderStrategy":[{"capacityProvider":"FARGATE"}]}`, 400, "InvalidParameterException", "Specifying both a launch type and capacity provider strategy"},
		{"RunTask", `{"taskDefinition":"nope:1"}`, 400, "InvalidParameterException", "TaskDefinition not found."},
		{"RunTask", `{"taskDefinition":"web","startedBy":"a b"}`, 400, "InvalidParameterException", "startedBy"},
		{"RunTask", `{"taskDefinition":"web","colour":"blue"}`, 400, "SerializationException", "colour"},
		{"RegisterTaskDefinition", strings.Replace(fargateDef, `"512"`, `"64"`, 1), 400, "ClientException", "No Fargate configuration exists for given values: 256 CPU, 64 memory"},
		{"RegisterTaskDefinition", strings.Replace(fargateDef, `"awsvpc"`, `"bridge"`, 1), 400, "ClientException", "Fargate only supports network mode"},
		{"RegisterTaskDefinition", strings.Replace(fargateDef, `"portMappings"`, `"logConfiguration":{"logDriver":"awslogs"},"portMappings"`, 1), 400, "ClientException", "Fargate requires task definition to have execution role ARN to support log driver awslogs."},
		{"DescribeTaskDefinition", `{"taskDefinition":"nope"}`, 400, "ClientException", "Unable to describe task definition."},
		{"StopTask", `{"task":"0123"}`, 400, "InvalidParameterException", "The referenced task was not found."},
		{"DescribeTasks", `{"tasks":[]}`, 400, "InvalidParameterException", "Tasks cannot be empty"},
		{"DeleteCluster", `{}`, 400, "UnknownOperationException", "DeleteCluster"},
	}
	for _, tc := range cases {
		code, out := call(t, srv.URL, tc.op, tc.body)
		if code != tc.status || out["__type"] != tc.typ || !strings.Contains(out["message"].(string), tc.msg) {
			t.Errorf("%s %s: %d %v; want %d %s %q", tc.op, tc.body, code, out, tc.status, tc.typ, tc.msg)
		}
	}
}

// A task goes PROVISIONING → PENDING → RUNNING, and on StopTask to STOPPED
// with the reason given; a client token gets the same task again; tags come
// back only when asked for; unknown tasks are MISSING failures; ListTasks
// filters by StartedBy and desired status, and pages.
func TestTaskLifecycle(t *testing.T) {
	s := New(Options{Provisioning: 50 * time.Millisecond, Pending: 50 * time.Millisecond})
	srv := httptest.NewServer(s)
	defer srv.Close()
	defer s.Close(context.Background())
	call(t, srv.URL, "RegisterTaskDefinition", fargateDef)
	_, out := call(t, srv.URL, "RunTask", runWeb)
	task := out["tasks"].([]any)[0].(map[string]any)
	arn := task["taskArn"].(string)
	if task["lastStatus"] != "PROVISIONING" || task["desiredStatus"] != "RUNNING" {
		t.Fatalf("new task: %v", task)
	}
	if _, again := call(t, srv.URL, "RunTask", runWeb); again["tasks"].([]any)[0].(map[string]any)["taskArn"] != arn {
		t.Fatalf("the same client token started another task: %v", again)
	}
	seen := map[string]bool{}
	describe := func(include string) map[string]any {
		_, out := call(t, srv.URL, "DescribeTasks", `{"tasks":["`+arn+`","nope"]`+include+`}`)
		if f := out["failures"].([]any); len(f) != 1 || f[0].(map[string]any)["reason"] != "MISSING" {
			t.Fatalf("failures for an unknown task: %v", out["failures"])
		}
		return out["tasks"].([]any)[0].(map[string]any)
	}
	// Often enough to see PENDING on the way.
	wait.For(t, "the task to be RUNNING", func() error {
		if seen[describe("")["lastStatus"].(string)] = true; !seen["RUNNING"] {
			return fmt.Errorf("saw %v", seen)
		}
		return nil
	}, wait.Every(5*time.Millisecond))
	if !seen["PENDING"] {
		t.Errorf("never PENDING on the way to RUNNING: %v", seen)
	}
	if _, ok := describe("")["tags"]; ok {
		t.Error("tags without include TAGS")
	}
	if tags := describe(`,"include":["TAGS"]`)["tags"].([]any); len(tags) != 1 {
		t.Errorf("tags with include TAGS: %v", tags)
	}
	ip := describe("")["attachments"].([]any)[0].(map[string]any)["details"].([]any)
	if last := ip[len(ip)-1].(map[string]any); last["name"] != "privateIPv4Address" || !strings.HasPrefix(last["value"].(string), "127.") {
		t.Errorf("ENI details: %v", ip)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"startedBy":"me"}`, arn}, {`{"startedBy":"other"}`, ""}, {`{"desiredStatus":"STOPPED"}`, ""},
	} {
		_, out := call(t, srv.URL, "ListTasks", tc.body)
		got := out["taskArns"].([]any)
		if (tc.want == "") != (len(got) == 0) || tc.want != "" && got[0] != tc.want {
			t.Errorf("ListTasks %s = %v", tc.body, got)
		}
	}
	if _, out := call(t, srv.URL, "StopTask", `{"task":"`+arn[strings.LastIndex(arn, "/")+1:]+`","reason":"done here"}`); out["task"].(map[string]any)["desiredStatus"] != "STOPPED" {
		t.Fatalf("StopTask: %v", out)
	}
	wait.Until(t, "the task to be STOPPED", func() bool { return describe("")["lastStatus"] == "STOPPED" })
	if d := describe(""); d["stoppedReason"] != "done here" || d["stopCode"] != "UserInitiated" {
		t.Errorf("stopped task: %v", d)
	}
	// Paging: three tasks, two per page.
	for i := range 2 {
		call(t, srv.URL, "RunTask", strings.Replace(runWeb, "tok-1", "tok-p"+string(rune('a'+i)), 1))
	}
	call(t, srv.URL, "RunTask", strings.Replace(runWeb, "tok-1", "tok-pc", 1))
	_, page := call(t, srv.URL, "ListTasks", `{"maxResults":2}`)
	_, rest := call(t, srv.URL, "ListTasks", `{"maxResults":2,"nextToken":"`+page["nextToken"].(string)+`"}`)
	if len(page["taskArns"].([]any)) != 2 || len(rest["taskArns"].([]any)) != 1 || rest["nextToken"] != nil {
		t.Errorf("pages: %v then %v", page, rest)
	}
}

// Faults injected over HTTP (the stand-in command's way) fire once each.
func TestFaultsOverHTTP(t *testing.T) {
	s := New(Options{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	defer s.Close(context.Background())
	call(t, srv.URL, "RegisterTaskDefinition", fargateDef)
	resp, err := http.Post(srv.URL+"/_standin/faults", "application/json", strings.NewReader(`{"capacity":1,"throttle":1,"throttle_op":"RunTask"}`))
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("inject: %v %v", resp, err)
	}
	if code, out := call(t, srv.URL, "RunTask", runWeb); code != 400 || out["__type"] != "ThrottlingException" {
		t.Fatalf("first RunTask: %d %v, want ThrottlingException", code, out)
	}
	if _, out := call(t, srv.URL, "RunTask", runWeb); len(out["tasks"].([]any)) != 0 || !strings.Contains(out["failures"].([]any)[0].(map[string]any)["reason"].(string), "Capacity is unavailable") {
		t.Fatalf("second RunTask: %v, want a capacity failure", out)
	}
	if _, out := call(t, srv.URL, "RunTask", runWeb); len(out["tasks"].([]any)) != 1 {
		t.Fatalf("third RunTask: %v, want a task", out)
	}
	if resp, _ := http.Post(srv.URL+"/_standin/faults", "application/json", strings.NewReader(`{"capacty":1}`)); resp.StatusCode != 400 {
		t.Errorf("a misspelt fault: %d, want 400", resp.StatusCode)
	}
}
