package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	local "github.com/agentenv/agentenv/plugins/sandbox-local"
	"github.com/agentenv/agentenv/plugins/sandbox-local/dockertest"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

// deployPhases are the times the local sandbox's "deployed" line reports
// for one Docker deploy.
type deployPhases struct {
	network, create, start, firstAnswer time.Duration
}

// phaseLog collects the phases of every "deployed" line the plugin logs
// (JSON lines).
type phaseLog struct {
	mu     sync.Mutex
	phases []deployPhases
}

func (l *phaseLog) Write(p []byte) (int, error) {
	var rec map[string]any
	if json.Unmarshal(p, &rec) == nil && rec["@message"] == "deployed" {
		d := func(k string) time.Duration {
			s, _ := rec[k].(string)
			v, _ := time.ParseDuration(s)
			return v
		}
		l.mu.Lock()
		l.phases = append(l.phases, deployPhases{d("network"), d("create"), d("start"), d("first_answer")})
		l.mu.Unlock()
	}
	return len(p), nil
}

func (l *phaseLog) take() []deployPhases {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.phases
	l.phases = nil
	return out
}

// BenchmarkDockerDeployPhases times each phase of a Docker-mode deploy of
// GridSim's env (network create, container create, start, first TCP
// answer behind the published port) and the removal, for one deploy alone
// and for AGENTENV_BENCH_AT_ONCE (default 8, eval's default concurrency)
// deploys at once, in the same loop: the ratio says how much of a deploy
// under concurrency is waiting on the engine. Run it under a CPU hog to
// see a loaded machine (docs/performance.md).
func BenchmarkDockerDeployPhases(b *testing.B) {
	dockertest.Client(b)
	atOnce := 8
	if v, err := strconv.Atoi(os.Getenv("AGENTENV_BENCH_AT_ONCE")); err == nil && v > 0 {
		atOnce = v
	}
	env, _ := gridsimEnv(b)
	p := local.New()
	logs := &phaseLog{}
	p.SetLogger(hclog.New(&hclog.LoggerOptions{Output: logs, JSONFormat: true, Level: hclog.Info}))
	cfg, _ := json.Marshal(map[string]any{"mode": "docker", "state_dir": b.TempDir()})
	ctx := context.Background()
	if err := p.Configure(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	sb := sdktest.Sandbox(b, p)
	nonce := fmt.Sprintf("%d", time.Now().UnixNano())
	spec := sandbox.Spec{Env: env.Name, Dir: env.Dir, Image: env.Image, Command: env.Command, Build: env.Build, Port: env.Port,
		CPU: env.CPU, MemoryMB: env.MemoryMB, Labels: map[string]string{benchLabel: nonce, sandbox.LabelServer: "bench-" + nonce}}
	if err := sb.Prepare(ctx, spec); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		left, _ := sb.List(context.Background(), map[string]string{benchLabel: nonce})
		for _, h := range left {
			_ = sb.Terminate(context.Background(), h)
		}
	})
	// round deploys n at once, then removes them at once; it returns the
	// removal's wall time.
	round := func(n int) time.Duration {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		hs := make([]sandbox.Sandbox, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { hs[i], errs[i] = sb.Deploy(dctx, spec) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		t := time.Now()
		for i := range n {
			wg.Go(func() { errs[i] = sb.Terminate(ctx, hs[i]) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(t)
	}
	round(1) // warm the paths
	logs.take()
	var alone, many []deployPhases
	var rmAlone, rmMany []time.Duration
	b.ResetTimer()
	for range b.N {
		rmAlone = append(rmAlone, round(1))
		alone = append(alone, logs.take()...)
		rmMany = append(rmMany, round(atOnce))
		many = append(many, logs.take()...)
	}
	b.StopTimer()
	report := func(suffix string, ps []deployPhases, rm []time.Duration) time.Duration {
		pick := func(f func(deployPhases) time.Duration) time.Duration {
			ds := make([]time.Duration, len(ps))
			for i, p := range ps {
				ds[i] = f(p)
			}
			return median(ds)
		}
		start := pick(func(p deployPhases) time.Duration { return p.start })
		b.ReportMetric(ms(pick(func(p deployPhases) time.Duration { return p.network })), "network-p50-ms-"+suffix)
		b.ReportMetric(ms(pick(func(p deployPhases) time.Duration { return p.create })), "create-p50-ms-"+suffix)
		b.ReportMetric(ms(start), "start-p50-ms-"+suffix)
		b.ReportMetric(ms(pick(func(p deployPhases) time.Duration { return p.firstAnswer })), "first-answer-p50-ms-"+suffix)
		b.ReportMetric(ms(median(rm)), "remove-all-p50-ms-"+suffix)
		return start
	}
	if len(alone) == 0 || len(many) == 0 {
		b.Fatal("the plugin logged no deployed line with phases")
	}
	s1 := report("alone", alone, rmAlone)
	sn := report(fmt.Sprintf("%d-at-once", atOnce), many, rmMany)
	b.ReportMetric(float64(sn)/float64(s1), "x-start-at-once-vs-alone")
}
