package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentenv/agentenv/sdk/sdktest"
)

func TestConformance(t *testing.T) {
	sdktest.RewardConformance(t, &weighted{cfg: config{Default: 1}})
}

func TestWeights(t *testing.T) {
	w := &weighted{}
	if err := w.Configure(context.Background(), json.RawMessage(`{"weights": {"grade": 3}}`)); err != nil {
		t.Fatal(err)
	}
	got, err := w.Combine(context.Background(), map[string]float64{"grade": 1, "format": 0})
	if err != nil || got != 0.75 {
		t.Fatalf("Combine = %v, %v; want 0.75", got, err)
	}
}
