package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/core/pluginhost"
	mean "github.com/agentenv/agentenv/plugins/reward-mean"
	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/reward"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

// rewardMeanDir builds the reward-mean plugin binary into a folder of its
// own, where a host finds it.
func rewardMeanDir(b *testing.B) string {
	b.Helper()
	bin := sdktest.Build(b, "github.com/agentenv/agentenv/plugins/reward-mean/cmd/agentenv-reward-mean")
	dir := filepath.Dir(bin)
	if err := os.Rename(bin, filepath.Join(dir, "agentenv-reward-mean")); err != nil {
		b.Fatal(err)
	}
	return dir
}

func benchHost(b *testing.B, dir string) *pluginhost.Host {
	b.Helper()
	h, err := pluginhost.New(pluginhost.Options{
		Logger:     hclog.NewNullLogger(),
		SearchPath: []string{dir},
		Builtins:   []string{},
		CachePath:  "-",
	})
	if err != nil {
		b.Fatal(err)
	}
	return h
}

var episodeScores = map[string]float64{"score/grade": 0.75, "score/answer": 1, "score/format": 0.5}

// perCall measures fn per call over n calls: mean and percentiles.
func perCall(n int, fn func()) (mean time.Duration, p50, p99 time.Duration) {
	d := make([]time.Duration, n)
	start := time.Now()
	for i := range d {
		t := time.Now()
		fn()
		d[i] = time.Since(t)
	}
	total := time.Since(start)
	p50, p99 = percentiles(d)
	return total / time.Duration(n), p50, p99
}

// percentiles sorts d and returns its median and 99th percentile.
func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2], d[len(d)*99/100]
}

// BenchmarkRewardCall is one reward call through the plugin host (proxy,
// gRPC over a unix socket with mTLS, the plugin process) against two
// floors measured in the same loop, call for call, so both see the same
// machine load: the same function called in-process, and the bare
// go-plugin gRPC client of the same binary without the host's proxy.
func BenchmarkRewardCall(b *testing.B) {
	dir := rewardMeanDir(b)
	h := benchHost(b, dir)
	defer h.Close()
	ctx := context.Background()
	r, err := h.Reward(ctx, "mean", nil)
	if err != nil {
		b.Fatal(err)
	}
	direct := sdktest.Launch(b, sdk.KindReward, filepath.Join(dir, "agentenv-reward-mean")).(reward.Combiner)
	inproc := mean.New()
	must := func(_ float64, err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	for range 200 { // warm connections and caches
		must(r.Combine(ctx, episodeScores))
		must(direct.Combine(ctx, episodeScores))
	}
	timed := func(c reward.Combiner) time.Duration {
		t := time.Now()
		must(c.Combine(ctx, episodeScores))
		return time.Since(t)
	}
	host := make([]time.Duration, 0, b.N)
	bare := make([]time.Duration, 0, b.N)
	local := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		host = append(host, timed(r))
		b.StopTimer()
		bare = append(bare, timed(direct))
		local = append(local, timed(inproc))
		b.StartTimer()
	}
	b.StopTimer()
	p50, p99 := percentile(host, 50), percentile(host, 99)
	b.ReportMetric(us(p50), "p50-µs")
	b.ReportMetric(us(p99), "p99-µs")
	b.ReportMetric(us(percentile(bare, 50)), "direct-p50-µs")
	b.ReportMetric(float64(p50)/float64(percentile(bare, 50)), "x-direct-grpc-p50")
	b.ReportMetric(float64(p50)/float64(max(percentile(local, 50), 1)), "x-in-process-p50")
}

// percentile sorts d and returns its p-th percentile.
func percentile(d []time.Duration, p int) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[(len(d)-1)*p/100]
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// BenchmarkPluginStart is the time from asking the host for a plugin to
// its first answer (exec, go-plugin handshake with AutoMTLS, dispense,
// Info, config check), against the floor of executing the same binary
// without the handshake cookie, which makes it exit at once.
func BenchmarkPluginStart(b *testing.B) {
	dir := rewardMeanDir(b)
	bin := filepath.Join(dir, "agentenv-reward-mean")
	ctx := context.Background()
	floor, _, _ := perCall(20, func() {
		// Exits 1 ("This binary is a plugin..."): process start and exit only.
		_ = exec.Command(bin).Run()
	})
	var total time.Duration
	n := 0
	for b.Loop() {
		n++
		h := benchHost(b, dir)
		t := time.Now()
		r, err := h.Reward(ctx, "mean", nil)
		if err == nil {
			_, err = r.Combine(ctx, episodeScores)
		}
		total += time.Since(t)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		h.Close()
		b.StartTimer()
	}
	per := total / time.Duration(n)
	b.ReportMetric(float64(per.Microseconds())/1e3, "start-ms")
	b.ReportMetric(float64(floor.Microseconds())/1e3, "exec-floor-ms")
	b.ReportMetric(float64(per)/float64(floor), "x-bare-exec")
}
