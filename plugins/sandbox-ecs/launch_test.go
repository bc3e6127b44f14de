package ecs

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ecs"

	"github.com/agentenv/agentenv/plugins/sandbox-ecs/standin"
	"github.com/agentenv/agentenv/plugins/sandbox-ecs/standin/standintest"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// deployMany deploys n envs at once, as a training step's resets do, then
// terminates them all; it returns the deploy errors. Each call's deploys
// carry labels of their own (the same deploy label would get the same
// client token, so the same task back).
func deployMany(p *Plugin, n int) error {
	run := clientToken(nil)[:8]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sbs := make([]sandbox.Sandbox, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sbs[i], errs[i] = p.Deploy(ctx, spec("listener:1", labels("bench", fmt.Sprint(run, "-ep", i))))
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Terminate(ctx, sbs[i]); err != nil {
				errs[i] = fmt.Errorf("terminate: %w", err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// launchClock records when the plugin calls RunTask: right after its
// launch limiter lets a deploy through, before any network delay (the
// SDK's retries of one call are not new launches).
type launchClock struct {
	API
	mu    sync.Mutex
	times []time.Time
}

func (c *launchClock) RunTask(ctx context.Context, in *ecs.RunTaskInput, opts ...func(*ecs.Options)) (*ecs.RunTaskOutput, error) {
	c.mu.Lock()
	c.times = append(c.times, time.Now())
	c.mu.Unlock()
	return c.API.RunTask(ctx, in, opts...)
}

func (c *launchClock) launches() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.times...)
}

// clocked puts a launchClock between p and its ECS client.
func clocked(p *Plugin) *launchClock {
	s, _ := p.setup()
	c := &launchClock{API: s.api}
	p.Use(s.cfg, c)
	return c
}

// launchRate is the pace of launches past the first burst, per second:
// the inverse of the least-squares slope of launch time against launch
// number, so one launch delayed by the scheduler does not skew it as a
// first-to-last span would.
func launchRate(times []time.Time, burst int) float64 {
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	pts := times[min(burst, len(times)):]
	if len(pts) < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i, t := range pts {
		x, y := float64(i), t.Sub(pts[0]).Seconds()
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	n := float64(len(pts))
	slope := (n*sxy - sx*sy) / (n*sxx - sx*sx)
	return 1 / slope
}

// 256 concurrent deploys with the launch limiter at 100/s (burst 10),
// against a stand-in that throttles RunTask above 150/s as ECS throttles
// above its quota: every deploy succeeds, and no launch comes sooner than
// the limiter allows: the k-th launch past the burst is at least k/100 s
// after the first.
func TestLaunchLimiterHolds(t *testing.T) {
	const n, rate, burst = 256, 100.0, 10
	s := standintest.Start(t, nil, standin.Options{RunTaskRate: 150, RunTaskBurst: 30})
	p := newPlugin(t, s.URL, map[string]any{"launch_rate": rate, "launch_burst": burst})
	clock := clocked(p)
	if err := deployMany(p, n); err != nil {
		t.Fatal(err)
	}
	if got := len(s.RunTaskTimes()); got != n {
		t.Fatalf("%d launches accepted for %d deploys", got, n)
	}
	times := clock.launches()
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	// The limiter's tokens: the i-th launch (from 0) waits (i-burst+1)/rate
	// from a full bucket; scheduling delays of the first launches are the
	// only slack.
	const slack = 100 * time.Millisecond
	for i := burst; i < n; i++ {
		earliest := time.Duration(float64(i-burst+1) / rate * float64(time.Second))
		if got := times[i].Sub(times[0]); got < earliest-slack {
			t.Fatalf("launch %d came %v after the first; the limiter allows it no sooner than %v", i, got, earliest)
		}
	}
	throttled := s.Calls()["RunTask"] - n
	t.Logf("%d deploys; launch rate past the burst %.1f/s (limit %.0f/s); %d RunTask calls throttled by the stand-in",
		n, launchRate(times, burst), rate, throttled)
}

// BenchmarkLaunch256 is 256 concurrent deploys (and their terminates)
// through the plugin against the stand-in in no-Docker mode, with the
// launch limiter at 200/s (burst 20), against a floor of the same deploys
// with the limiter out of the way. It reports the launch rate reached (the
// mean over iterations of the fitted pace of the plugin's RunTask calls)
// and its ratio to the limit; TestLaunchLimiterHolds checks the strict
// bound launch by launch.
func BenchmarkLaunch256(b *testing.B) {
	const n, rate, burst = 256, 200.0, 20
	s := standintest.Start(b, nil, standin.Options{})
	floor := time.Duration(0)
	for range 3 {
		p := newPlugin(b, s.URL, map[string]any{"launch_rate": 1e6, "launch_burst": n})
		start := time.Now()
		if err := deployMany(p, n); err != nil {
			b.Fatal(err)
		}
		if d := time.Since(start); floor == 0 || d < floor {
			floor = d
		}
	}
	var reached float64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		p := newPlugin(b, s.URL, map[string]any{"launch_rate": rate, "launch_burst": burst})
		clock := clocked(p)
		b.StartTimer()
		if err := deployMany(p, n); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		reached += launchRate(clock.launches(), burst) / float64(b.N)
		b.StartTimer()
	}
	perOp := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(n)/perOp.Seconds(), "deploys/s")
	b.ReportMetric(reached, "launches/s")
	b.ReportMetric(reached/rate, "x_limit")
	b.ReportMetric(floor.Seconds(), "floor_s")
	b.ReportMetric(perOp.Seconds()/floor.Seconds(), "x_floor")
}
