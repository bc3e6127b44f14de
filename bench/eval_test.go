package bench

// BenchmarkEvalGridSim: `agentenv eval` over GridSim's 200 eval days
// against the GridSim policy server, 64 rollouts at a time, against the
// floor of the same episodes played by bare client sessions.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/client"
	"github.com/agentenv/agentenv/core/dataset/skyrl/oracles"
	"github.com/agentenv/agentenv/internal/servetest"
)

const (
	evalDays        = 200
	evalConcurrency = 64
)

// policyServer builds examples/gridsim's policy server once per run.
func policyServer(b *testing.B) string {
	b.Helper()
	return servetest.Build(b, "github.com/agentenv/agentenv/examples/gridsim/cmd/gridsim-policy", "")
}

// cpuSeconds is a process's CPU time so far, its waited-for children's
// included (/proc/PID/stat utime+stime+cutime+cstime), in seconds.
func cpuSeconds(b *testing.B, pid int) float64 {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	var ticks float64
	for _, i := range []int{11, 12, 13, 14} { // fields 14-17, 1-based, less the two before
		v, _ := strconv.ParseFloat(f[i], 64)
		ticks += v
	}
	return ticks / 100 // USER_HZ
}

func selfCPU() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// Replies of the idle policy, as the policy server writes them in hermes.
var idleReplies = []string{
	"<tool_call>\n" + `{"name": "get_prices", "arguments": {}}` + "\n</tool_call>",
	"<tool_call>\n" + `{"name": "submit_schedule", "arguments": {"schedule": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]}}` + "\n</tool_call>",
	"The schedule is submitted.",
}

// playFloor plays the eval days with bare sessions, the idle policy's
// replies written in advance: the server's work without eval's.
func playFloor(b *testing.B, addr string, days int) {
	b.Helper()
	c, err := client.New(addr, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	var failed sync.Once
	for range min(evalConcurrency, days) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			s, err := c.Connect(ctx)
			if err != nil {
				failed.Do(func() { b.Error(err) })
				return
			}
			defer s.Close()
			for i := range next {
				res, err := s.Reset(ctx, client.ResetRequest{Split: "eval", Index: i, MaxTurns: 4})
				for _, r := range idleReplies {
					if err != nil {
						break
					}
					res, err = s.Step(ctx, r)
				}
				if err != nil || !res.Done || res.Reward == nil || *res.Reward != 0.2 {
					failed.Do(func() { b.Errorf("floor day %d: %+v %v", i, res, err) })
				}
			}
		}()
	}
	for i := range days {
		next <- i
	}
	close(next)
	wg.Wait()
}

// evalSummary is the part of eval's --json summary read here.
type evalSummary struct {
	Rollouts   int     `json:"rollouts"`
	Scored     int     `json:"scored"`
	MeanReward float64 `json:"mean_reward"`
	MeanModelS float64 `json:"mean_model_s"`
	MeanEnvS   float64 `json:"mean_env_s"`
	MeanWallS  float64 `json:"mean_wall_s"`
}

// runEval runs agentenv eval over the first days eval days and returns
// its summary, wall time and CPU time.
func runEval(b *testing.B, agentenv, server, model string, days int) (evalSummary, time.Duration, float64) {
	b.Helper()
	out := filepath.Join(b.TempDir(), "results.jsonl")
	cmd := exec.Command(agentenv, "eval", "http://"+server, "--model-url", "http://"+model+"/v1", "--model", "idle",
		"--tokenizer", oracles.Qwen3Dir(b), "--chat-template-kwargs", `{"enable_thinking": false}`,
		"--concurrency", strconv.Itoa(evalConcurrency), "--limit", strconv.Itoa(days), "--out", out, "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("eval: %v\n%s", err, stderr.String())
	}
	wall := time.Since(start)
	var s evalSummary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil || s.Scored != days || s.MeanReward < 0.2-1e-9 || s.MeanReward > 0.2+1e-9 {
		b.Fatalf("eval summary %+v %v\n%s", s, err, stdout.String())
	}
	cpu := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	return s, wall, cpu
}

// BenchmarkEvalGridSim measures `agentenv eval` (the binary) over the 200
// eval days at --concurrency 64 against the policy server's idle policy.
// Floor: the same 200 episodes, same replies, same concurrency, played by
// bare client sessions in the benchmark process. Reported: both walls and
// their ratio; eval's CPU (the process: sessions, prompts rendered with
// Qwen3's template, HTTP to the model, results written) against the
// floor client's CPU and the server's CPU over the eval (its env
// processes and plugins not included).
func BenchmarkEvalGridSim(b *testing.B) {
	agentenv, _ := binaries(b)
	policy := policyServer(b)
	srv := serveGridsim(b)
	modelAddr := freePort(b)
	start(b, modelAddr, "/health", policy, "--addr", modelAddr, "--log-level", "warn")
	// Warm both paths: the env built, plugin processes up, caches filled.
	runEval(b, agentenv, srv.addr, modelAddr, 16)
	playFloor(b, srv.addr, 16)

	var evalWall, floorWall time.Duration
	var evalCPU, floorCPU, serverCPU, modelS, envS, rolloutS float64
	b.ResetTimer()
	for range b.N {
		t0, c0 := time.Now(), selfCPU()
		playFloor(b, srv.addr, evalDays)
		floorWall += time.Since(t0)
		floorCPU += selfCPU() - c0

		s0 := cpuSeconds(b, srv.cmd.Process.Pid)
		s, wall, cpu := runEval(b, agentenv, srv.addr, modelAddr, evalDays)
		serverCPU += cpuSeconds(b, srv.cmd.Process.Pid) - s0
		evalWall += wall
		evalCPU += cpu
		modelS += s.MeanModelS
		envS += s.MeanEnvS
		rolloutS += s.MeanWallS
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(evalWall.Seconds()/n, "eval-s")
	b.ReportMetric(floorWall.Seconds()/n, "floor-s")
	b.ReportMetric(evalWall.Seconds()/floorWall.Seconds(), "x-floor")
	b.ReportMetric(evalCPU/n, "eval-cpu-s")
	b.ReportMetric(floorCPU/n, "floor-cpu-s")
	b.ReportMetric(serverCPU/n, "server-cpu-s")
	b.ReportMetric(evalCPU/serverCPU, "eval-cpu/server-cpu")
	b.ReportMetric(1000*evalCPU/n/evalDays, "eval-cpu-ms/rollout")
	b.ReportMetric(1000*modelS/n, "model-ms/rollout")
	b.ReportMetric(1000*envS/n, "env-ms/rollout")
	b.ReportMetric(1000*rolloutS/n, "rollout-ms")
}
