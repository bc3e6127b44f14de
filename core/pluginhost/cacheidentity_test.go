package pluginhost

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A renamed copy of a plugin (same sha256, so the same cached Info) is
// listed as failed every time, not "ok" once the cache knows its Info:
// `plugins list` must not say ok of a plugin serve refuses.
func TestCachedInfoStillChecksTheName(t *testing.T) {
	dir := t.TempDir()
	bin := rewardV(t, "v1")
	install(t, bin, dir, "agentenv-reward-v")
	install(t, bin, dir, "agentenv-reward-w") // its Info says reward-v
	cache := filepath.Join(t.TempDir(), "plugins.json")
	ctx := ctxTimeout(t, 60*time.Second)
	for round := range 3 {
		h := newHost(t, dir, func(o *Options) { o.CachePath = cache })
		es, err := h.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.Name == "w" && (e.OK() || !strings.Contains(e.Status, "its Info says it is reward-v, but it was found as reward-w")) {
				t.Fatalf("list %d: renamed plugin %q, want it failed for its name", round+1, e.Status)
			}
		}
		e, err := h.Inspect(ctx, "reward-w")
		if err != nil || e.OK() {
			t.Fatalf("inspect %d of the renamed plugin: %+v %v", round+1, e.Status, err)
		}
	}
}
