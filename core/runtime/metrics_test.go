package runtime

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/gorilla/websocket"

	"github.com/agentenv/agentenv/core/server"
)

// The engine's phase timings and outcomes reach /metrics, labelled by
// sandbox and env, and the final observation carries the episode's times:
// a real episode on the test env through the sandbox plugin.
func TestMetricsFromTheEngine(t *testing.T) {
	m := server.NewMetrics()
	rt := openRuntimeWith(t, func(o *Options) { o.Observer = m })
	m.Prime("local", []string{"testenv"})
	srv, err := server.New(server.Options{Player: rt.Engine, Catalog: server.NewBundleCatalog(rt.Bundle), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	primed := scrapeMetrics(t, hs.URL)
	for _, series := range []string{
		`agentenv_episode_phase_seconds_count{env="testenv",phase="teardown",sandbox="local"} 0`,
		`agentenv_episode_outcomes_total{cause="env_crashed",env="testenv",outcome="failed",sandbox="local",source="infrastructure"} 0`,
		`agentenv_episode_outcomes_total{cause="max_turns",env="testenv",outcome="done",sandbox="local",source="model"} 0`,
	} {
		if !strings.Contains(primed, series+"\n") {
			t.Errorf("before any episode /metrics lacks %s", series)
		}
	}

	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(hs.URL, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	send := func(msg string) map[string]any {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(time.Minute)) //nolint:errcheck
		if err := conn.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		var reply struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := conn.ReadJSON(&reply); err != nil {
			t.Fatal(err)
		}
		if reply.Type != "observation" {
			t.Fatalf("%s: got %v", msg, reply)
		}
		return reply.Data
	}
	send(`{"type":"reset","data":{"task_id":"puzzle"}}`)
	send(`{"type":"step","data":{"reply":"<tool_call>{\"name\":\"add\",\"arguments\":{\"n\":3}}</tool_call>"}}`)
	final := send(`{"type":"step","data":{"reply":"I reached 5."}}`)
	if final["done"] != true {
		t.Fatalf("not done: %v", final)
	}
	times, _ := final["observation"].(map[string]any)["times"].(map[string]any)
	for _, p := range []string{"queue", "deploy", "ready", "setup", "step", "tool", "verify", "teardown"} {
		if _, ok := times[p].(float64); !ok {
			t.Errorf("final observation's times lack %s: %v", p, times)
		}
	}
	if d, _ := times["deploy"].(float64); d <= 0 {
		t.Errorf("deploy time %v, want > 0", times["deploy"])
	}

	// The outcome is counted once the teardown finished.
	outcome := `agentenv_episode_outcomes_total{cause="completed",env="testenv",outcome="done",sandbox="local",source="none"} 1`
	var text string
	wait.Until(t, "/metrics to show "+outcome, func() bool {
		text = scrapeMetrics(t, hs.URL)
		return strings.Contains(text, outcome+"\n")
	}, wait.Every(50*time.Millisecond))
	for phase, n := range map[string]int{"queue": 1, "deploy": 1, "ready": 1, "setup": 1, "step": 2, "tool": 1, "verify": 1, "teardown": 1} {
		series := fmt.Sprintf(`agentenv_episode_phase_seconds_count{env="testenv",phase=%q,sandbox="local"} %d`, phase, n)
		if !strings.Contains(text, series+"\n") {
			t.Errorf("/metrics lacks %s", series)
		}
	}
}

func scrapeMetrics(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
