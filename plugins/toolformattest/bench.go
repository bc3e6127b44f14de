package toolformattest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/toolformat"
)

// p50 returns the median of ds.
func p50(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// RunPaired times op and floor alternately, b.N times each, and reports
// both medians and their ratio.
func RunPaired(b *testing.B, op, floor func()) {
	b.Helper()
	ops, floors := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		floor()
		t1 := time.Now()
		op()
		t2 := time.Now()
		floors, ops = append(floors, t1.Sub(t0)), append(ops, t2.Sub(t1))
	}
	b.StopTimer()
	opP50, floorP50 := p50(ops), p50(floors)
	b.ReportMetric(float64(opP50.Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(floorP50.Nanoseconds())/1e3, "floor-p50-µs")
	b.ReportMetric(float64(opP50)/float64(max(floorP50, 1)), "x-floor")
}

// BenchParsePlugin times Parse of reply (which must hold wantCalls calls)
// through the plugin binary at cmdPkg over go-plugin gRPC, as the host
// calls it. Floor: a bare round trip to the same process (Info).
func BenchParsePlugin(b *testing.B, cmdPkg, reply string, tools []toolformat.Tool, wantCalls int) {
	c := LaunchBinary(b, cmdPkg)
	ctx := context.Background()
	b.SetBytes(int64(len(reply)))
	// One tool set, as a host makes one per turn: the tools cross once.
	set := toolformat.NewToolSet(tools)
	if got, err := c.ParseSet(ctx, reply, set); err != nil || len(got.Calls) != wantCalls {
		b.Fatalf("bench reply parses to %+v, %v", got, err)
	}
	RunPaired(b,
		func() {
			if _, err := c.ParseSet(ctx, reply, set); err != nil {
				b.Fatal(err)
			}
		},
		func() {
			if _, err := c.RemoteInfo(ctx); err != nil {
				b.Fatal(err)
			}
		})
}
