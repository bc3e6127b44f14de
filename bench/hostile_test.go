package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentenv/agentenv/client"
)

// qwenCall is a qwen3_coder call of submit_schedule, whose schedule (an
// array) is read as JSON, then as a Python literal.
func qwenCall(schedule string) string {
	return "<tool_call>\n<function=submit_schedule>\n<parameter=schedule>\n" + schedule + "\n</parameter>\n</function>\n</tool_call>"
}

// hostileCases are the replies of issue 34 (round 4): each is played as
// one step of a qwen3_coder episode (reps steps in a row).
var hostileCases = []struct {
	name  string
	reply string
	reps  int
}{
	// A Python literal (the trailing comma makes it not JSON) of 9.5 MiB.
	{"literal-9.5MiB", qwenCall("[" + strings.Repeat("0,", 4_980_000) + "]"), 1},
	// A hex literal of 6 MiB: its decimal form is refused.
	{"hex-6MiB", qwenCall("[0x" + strings.Repeat("f", 6<<20) + "]"), 1},
	// 24 replies of 15 MiB that a live episode's transcript would keep.
	{"24x15MiB-replies", strings.Repeat("x", 15<<20) + qwenCall("[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]"), 24},
}

// BenchmarkHostileReplies plays each hostile reply against the real
// server (transcripts recorded, the /ui ring on) while another session
// steps GridSim with a one-line reply, and reports the hostile step's
// time, the server's peak memory growth over the case (VmHWM, reset
// before each), and the other session's step latency during it, against
// the floor of that session's steps with nothing else running (measured
// in the same run).
func BenchmarkHostileReplies(b *testing.B) {
	srv := serveGridsim(b, "--record", b.TempDir())
	pid := srv.cmd.Process.Pid
	ctx := context.Background()
	other, _ := dayEpisode(b, srv.addr)
	step := idleStep(b, other)
	for range 100 {
		step()
	}
	_, floorP50, _ := perCall(500, step)

	for _, tc := range hostileCases {
		b.Run(tc.name, func(b *testing.B) {
			var worst time.Duration
			var grew int64
			var otherMax, otherP99 time.Duration
			for range b.N {
				hostile := dial(b, srv.addr)
				if _, err := hostile.Reset(ctx, client.ResetRequest{TaskID: "day/eval-001", ToolFormat: "qwen3_coder"}); err != nil {
					b.Fatal(err)
				}
				base := resetPeak(b, pid)
				stop := make(chan struct{})
				var lat []time.Duration
				var wg sync.WaitGroup
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						t := time.Now()
						step()
						lat = append(lat, time.Since(t))
					}
				})
				for range tc.reps {
					t := time.Now()
					res, err := hostile.Step(ctx, tc.reply)
					if err != nil {
						b.Fatalf("%s: %v", tc.name, err)
					}
					worst = max(worst, time.Since(t))
					if res.Done {
						b.Fatalf("%s: the episode ended", tc.name)
					}
				}
				close(stop)
				wg.Wait()
				grew = max(grew, peak(b, pid)-base)
				hostile.Close()
				if len(lat) > 0 {
					_, p99 := percentiles(lat)
					otherP99 = max(otherP99, p99)
					otherMax = max(otherMax, lat[len(lat)-1]) // sorted
				}
			}
			b.ReportMetric(worst.Seconds(), "hostile-step-s")
			b.ReportMetric(float64(grew>>20), "peak-growth-MiB")
			b.ReportMetric(float64(otherP99.Microseconds())/1e3, "other-p99-ms")
			b.ReportMetric(float64(otherMax.Microseconds())/1e3, "other-max-ms")
			b.ReportMetric(float64(floorP50.Microseconds())/1e3, "other-p50-alone-ms")
			b.ReportMetric(float64(otherMax)/float64(floorP50), "x-other-alone")
		})
	}
}

// resetPeak resets the process's peak resident memory (VmHWM) to its
// resident memory now, and returns that.
func resetPeak(b *testing.B, pid int) int64 {
	b.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		b.Skipf("cannot reset the peak memory of the server: %v", err)
	}
	return rss(b, pid)
}

// peak is the process's peak resident memory (VmHWM) in bytes.
func peak(b *testing.B, pid int) int64 {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), "kB"), &kb)
			return kb << 10
		}
	}
	b.Fatal("no VmHWM")
	return 0
}
