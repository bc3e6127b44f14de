package server

import (
	"testing"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"
)

// A client that disconnects mid-step has abandoned its episode, as
// serving.md says: counted "abandoned", not "failed".
func TestDisconnectMidStepIsAbandoned(t *testing.T) {
	p := newFakePlayer()
	ts := startServer(t, Options{Player: p})
	c := ts.dial(t, "")
	c.observation(t, `{"type":"reset","data":{"task_id":"day/1"}}`)
	c.sendRaw(t, `{"type":"step","data":{"reply":"hold"}}`)
	p.waitStep(t, "hold")
	c.conn.Close()
	wait.Until(t, "the episode to be counted", func() bool {
		a, _ := metricValue(t, ts, "", `agentenv_episodes_total{outcome="abandoned"}`)
		f, _ := metricValue(t, ts, "", `agentenv_episodes_total{outcome="failed"}`)
		if f > 0 {
			t.Fatalf("an episode whose client left mid-step counted as failed")
		}
		return a == 1
	})
}
