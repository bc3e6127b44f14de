package pluginhost

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/hashicorp/go-hclog"
)

// Whatever a plugin logs through the SDK's logger, hclog's default logger
// or the standard log package shows in the host's log at its own level,
// named after the plugin, with one timestamp (the host's); lines below the
// host's level are not even sent.
func TestPluginLogLines(t *testing.T) {
	dir := t.TempDir()
	install(t, rewardV(t, "v8"), dir, "agentenv-reward-v")
	// A date anywhere after the host's own timestamp is a second one.
	secondStamp := regexp.MustCompile(`\d{4}[-/]\d{2}[-/]\d{2}[T ]\d{2}:\d{2}`)
	for _, tc := range []struct {
		level hclog.Level
		want  []string // every one on some line (key/value pairs come in no fixed order)
		never []string
	}{
		{hclog.Info, []string{
			"[INFO]  agentenv.plugins.reward-v: configured: | scale=2 | version=v8",
			"[WARN]  agentenv.plugins.reward-v.cfg: scale set: scale=2",
			"[INFO]  agentenv.plugins.reward-v: std log: scale 2",
			"[ERROR] agentenv.plugins.reward-v: std log error: scale 2",
		}, []string{"configured (debug)", "timestamp=", "@module"}},
		{hclog.Debug, []string{
			"[DEBUG] agentenv.plugins.reward-v: configured (debug): scale=2",
			"[INFO]  agentenv.plugins.reward-v: std log: scale 2",
		}, []string{"timestamp="}},
	} {
		t.Run(tc.level.String(), func(t *testing.T) {
			var buf syncBuffer
			h := newHost(t, dir, func(o *Options) {
				o.Logger = hclog.New(&hclog.LoggerOptions{Name: "agentenv", Output: &buf, Level: tc.level})
			})
			if _, err := h.Reward(ctxTimeout(t, time.Minute), "v", json.RawMessage(`{"scale": 2}`)); err != nil {
				t.Fatal(err)
			}
			found := func(want string) bool {
				for _, line := range strings.Split(buf.String(), "\n") {
					all := true
					for _, part := range strings.Split(want, " | ") {
						all = all && strings.Contains(line, part)
					}
					if all {
						return true
					}
				}
				return false
			}
			for _, want := range tc.want {
				wait.Until(t, fmt.Sprintf("the host log line %q", want), func() bool { return found(want) })
			}
			for _, line := range strings.Split(buf.String(), "\n") {
				if !strings.Contains(line, "agentenv.plugins.reward-v") {
					continue
				}
				for _, never := range tc.never {
					if strings.Contains(line, never) {
						t.Errorf("host log line has %q: %s", never, line)
					}
				}
				if _, rest, ok := strings.Cut(line, " ["); ok && secondStamp.MatchString(rest) {
					t.Errorf("host log line has a second timestamp: %s", line)
				}
			}
		})
	}
}
