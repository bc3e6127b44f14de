package sdktest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk"
)

// check is one conformance check: it returns nil or what is wrong.
type check struct {
	name string
	run  func(ctx context.Context) error
}

// runChecks runs each check as a subtest with a deadline.
func runChecks(t *testing.T, checks []check) {
	t.Helper()
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := c.run(ctx); err != nil {
				t.Error(err)
			}
		})
	}
}

// infoChecks are the checks every plugin's Info must pass.
func infoChecks(r sdk.Remote, kind sdk.Kind) []check {
	return []check{{"info", func(ctx context.Context) error {
		info, err := r.RemoteInfo(ctx)
		if err != nil {
			return fmt.Errorf("Info: %w", err)
		}
		if info.Name == "" {
			return fmt.Errorf("Info: empty name")
		}
		if info.Kind != kind {
			return fmt.Errorf("Info: kind %q, want %q", info.Kind, kind)
		}
		if info.Version == "" {
			return fmt.Errorf("Info: empty version")
		}
		if len(info.Protocols) == 0 {
			return fmt.Errorf("Info: no protocol versions")
		}
		if len(info.ConfigSchema) > 0 {
			var schema map[string]any
			if err := json.Unmarshal(info.ConfigSchema, &schema); err != nil {
				return fmt.Errorf("Info: config schema is not a JSON object: %w", err)
			}
		}
		return nil
	}}}
}
