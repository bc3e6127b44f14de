package hermes

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A parse stops when its step ends: with its context cancelled, a flood
// of blocks is given up with the context's error.
func TestParseStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	reply := strings.Repeat(`<tool_call>{"name": "f", "arguments": {}}</tool_call>`, 10_000)
	if _, err := New().Parse(ctx, reply, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled parse returned %v, want context.Canceled", err)
	}
	if got, err := New().Parse(context.Background(), reply, nil); err != nil || len(got.Calls) != 10_000 {
		t.Fatalf("the same reply uncancelled: %d calls, %v", len(got.Calls), err)
	}
}
