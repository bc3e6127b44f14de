package sdktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/reward"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// meanReward is a correct reward plugin.
type meanReward struct{}

func (meanReward) Info() sdk.Info { return sdk.Info{Name: "mean", Kind: sdk.KindReward, Version: "1"} }
func (meanReward) Combine(_ context.Context, s map[string]float64) (float64, error) {
	if len(s) == 0 {
		return 0, errors.New("no scores")
	}
	// Sum in key order: float addition is not associative, and the same
	// scores must always give the same reward.
	keys := slices.Sorted(maps.Keys(s))
	sum := 0.0
	for _, k := range keys {
		if math.IsNaN(s[k]) || math.IsInf(s[k], 0) {
			return 0, errors.New("non-finite score")
		}
		sum += s[k]
	}
	return sum / float64(len(s)), nil
}

// lenientReward makes up a reward for input it should refuse.
type lenientReward struct{ meanReward }

func (lenientReward) Combine(_ context.Context, s map[string]float64) (float64, error) {
	if len(s) == 0 {
		return 0, nil
	}
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	return sum, nil
}

func TestRewardConformancePasses(t *testing.T) { RewardConformance(t, meanReward{}) }

func TestRewardChecksCatchALenientPlugin(t *testing.T) {
	c := Reward(t, lenientReward{})
	failed := map[string]bool{}
	for _, ch := range rewardChecks(c) {
		if ch.run(context.Background()) != nil {
			failed[ch.name] = true
		}
	}
	for _, want := range []string{"refuses no scores", "refuses non-finite scores"} {
		if !failed[want] {
			t.Errorf("check %q passed a plugin that should fail it", want)
		}
	}
	if failed["combines"] {
		t.Errorf("check \"combines\" failed a plugin that combines")
	}
}

func TestErrorsCrossTheWire(t *testing.T) {
	c := Reward(t, meanReward{})
	_, err := c.Combine(context.Background(), nil)
	if err == nil || err.Error() != "no scores" {
		t.Fatalf("Combine(nil) error = %v, want the plugin's own message", err)
	}
	var pe *sdk.PluginError
	if !errors.As(err, &pe) || pe.Unavailable() {
		t.Fatalf("error %v is not a refusing *sdk.PluginError", err)
	}
}

// tagParser reads <tool_call>{json}</tool_call>; enough to drive the suite.
type tagParser struct{ ignoreUnclosed bool }

var tagRE = regexp.MustCompile(`(?s)<tool_call>(.*?)(?:</tool_call>|$)`)

func (tagParser) Info() sdk.Info {
	return sdk.Info{Name: "tags", Kind: sdk.KindToolFormat, Version: "1"}
}

func (p tagParser) Parse(_ context.Context, text string, _ []toolformat.Tool) (toolformat.Parsed, error) {
	var out toolformat.Parsed
	loc := tagRE.FindAllStringSubmatchIndex(text, -1)
	if len(loc) == 0 {
		out.Content = text
		return out, nil
	}
	out.Content = text[:loc[0][0]]
	for _, l := range loc {
		body := text[l[2]:l[3]]
		var call struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		err := json.Unmarshal([]byte(body), &call)
		var args map[string]any
		if err == nil {
			err = json.Unmarshal(call.Arguments, &args)
		}
		if err != nil || call.Name == "" || args == nil {
			out.Unparsed = append(out.Unparsed, toolformat.Unparsed{Text: body, Reason: fmt.Sprintf("not a call: %v", err)})
			continue
		}
		out.Calls = append(out.Calls, toolformat.Call{Name: call.Name, Arguments: call.Arguments})
	}
	return out, nil
}

func TestToolFormatConformancePasses(t *testing.T) {
	ToolFormatConformance(t, tagParser{}, ToolFormatSample{
		Text:  `ok <tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}</tool_call>`,
		Tools: conformanceTools,
		Want:  []toolformat.Call{{Name: "get_weather", Arguments: json.RawMessage(`{"days":2,"city":"Oslo"}`)}},
	})
}

// memSandbox "deploys" a loopback listener; enough to drive the suite.
// Instances sharing a memStore stand for processes of one plugin.
type memSandbox struct{ *memStore }

type memStore struct {
	mu   sync.Mutex
	live map[string]struct {
		ln     net.Listener
		labels map[string]string
	}
	n        int
	prepared int
}

func (m *memSandbox) Prepare(context.Context, sandbox.Spec) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prepared++
	return nil
}

func (*memSandbox) Info() sdk.Info { return sdk.Info{Name: "mem", Kind: sdk.KindSandbox, Version: "1"} }

func (m *memSandbox) Deploy(_ context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n++
	id := fmt.Sprintf("mem-%d", m.n)
	if m.live == nil {
		m.live = map[string]struct {
			ln     net.Listener
			labels map[string]string
		}{}
	}
	m.live[id] = struct {
		ln     net.Listener
		labels map[string]string
	}{ln, spec.Labels}
	return sandbox.Sandbox{ID: id, Endpoint: "http://" + ln.Addr().String(), Labels: spec.Labels}, nil
}

func (m *memSandbox) Terminate(_ context.Context, sb sandbox.Sandbox) error {
	id := sb.ID
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.live[id]
	if !ok {
		return fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	delete(m.live, id)
	return s.ln.Close()
}

func (m *memSandbox) List(_ context.Context, labels map[string]string) ([]sandbox.Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []sandbox.Sandbox
next:
	for id, s := range m.live {
		for k, v := range labels {
			if s.labels[k] != v {
				continue next
			}
		}
		out = append(out, sandbox.Sandbox{ID: id, Endpoint: "http://" + s.ln.Addr().String(), Labels: s.labels})
	}
	return out, nil
}

func (m *memSandbox) Exec(ctx context.Context, sb sandbox.Sandbox, cmd []string) (sandbox.ExecResult, error) {
	id := sb.ID
	m.mu.Lock()
	_, ok := m.live[id]
	m.mu.Unlock()
	if !ok {
		return sandbox.ExecResult{}, fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	var stdout, stderr strings.Builder
	c := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return sandbox.ExecResult{}, err
	}
	return sandbox.ExecResult{ExitCode: c.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String()}, nil
}

func TestSandboxConformancePasses(t *testing.T) {
	store := &memStore{}
	SandboxConformance(t, &memSandbox{store}, SandboxCase{
		Spec:        sandbox.Spec{Env: "mem", Labels: map[string]string{"agentenv.episode": "ep-1"}},
		ExecCommand: []string{"echo", "hello"},
		ExecStdout:  "hello",
		Restart:     func() sandbox.Plugin { return &memSandbox{store} },
		PrepareCount: func() int {
			store.mu.Lock()
			defer store.mu.Unlock()
			return store.prepared
		},
	})
}

func TestLaunchRealSubprocess(t *testing.T) {
	bin := Build(t, "./testdata/echoreward")
	c := Launch(t, sdk.KindReward, bin).(*reward.Client)
	info, err := c.RemoteInfo(context.Background())
	if err != nil || info.Name != "echo" || info.Version != "1.2.3" || len(info.Protocols) == 0 {
		t.Fatalf("RemoteInfo = %+v, %v", info, err)
	}
	r, err := c.Combine(context.Background(), map[string]float64{"a": 1, "b": 0.5})
	if err != nil || r != 0.75 {
		t.Fatalf("Combine = %v, %v; want 0.75", r, err)
	}
	if _, err := c.Combine(context.Background(), map[string]float64{"a": math.Inf(1)}); err == nil || !strings.Contains(err.Error(), "score a is +Inf") {
		t.Fatalf("Combine(+Inf) error = %v, want the plugin's message", err)
	}
}
