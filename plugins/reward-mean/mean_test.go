package mean

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/reward"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

func TestCombine(t *testing.T) {
	tests := []struct {
		name    string
		scores  map[string]float64
		want    float64
		wantErr string
	}{
		{"one", map[string]float64{"grade": 0.75}, 0.75, ""},
		{"several", map[string]float64{"a": 1, "b": 0, "c": 0.5}, 0.5, ""},
		{"negative", map[string]float64{"a": -1, "b": 2}, 0.5, ""},
		{"none", map[string]float64{}, 0, "no scores"},
		{"nil", nil, 0, "no scores"},
		{"NaN", map[string]float64{"ok": 1, "grade": math.NaN()}, 0, `step "grade" is NaN`},
		{"+Inf", map[string]float64{"grade": math.Inf(1)}, 0, `step "grade" is +Inf`},
		{"-Inf", map[string]float64{"grade": math.Inf(-1)}, 0, `step "grade" is -Inf`},
		{"overflow", map[string]float64{"a": math.MaxFloat64, "b": math.MaxFloat64}, 0, "overflows"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := New().Combine(context.Background(), tc.scores)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Combine = %v, %v; want error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Combine = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	if _, err := New().Combine(context.Background(), nil); !errors.Is(err, ErrNoScores) {
		t.Fatalf("no scores: %v, want ErrNoScores", err)
	}
}

func TestConformance(t *testing.T) { sdktest.RewardConformance(t, New()) }

// TestBinary runs the plugin binary as the host does, over go-plugin.
func TestBinary(t *testing.T) {
	bin := sdktest.Build(t, "./cmd/agentenv-reward-mean")
	c := sdktest.Launch(t, sdk.KindReward, bin).(reward.Combiner)
	got, err := c.Combine(context.Background(), map[string]float64{"a": 1, "b": 0.5})
	if err != nil || got != 0.75 {
		t.Fatalf("Combine over go-plugin = %v, %v; want 0.75", got, err)
	}
	_, err = c.Combine(context.Background(), map[string]float64{"bad": math.NaN()})
	if err == nil || !strings.Contains(err.Error(), `step "bad" is NaN`) {
		t.Fatalf("NaN over go-plugin: %v", err)
	}
}
