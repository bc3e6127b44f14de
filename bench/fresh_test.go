package bench

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/agentenv/agentenv/client"
	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/envclient"
)

// BenchmarkFreshEpisode is one client playing GridSim episodes back to back,
// each on a fresh env: reset (deploy the env process, wait for it, list its
// tools, load the day), one submit_schedule step, the final reply (grade,
// reward). Teardown happens after the final reply, off the client's path.
// The floor, measured episode for episode in the same loop: start the same
// env binary by hand, connect over MCP, make one call, kill it and wait
// for it. Target: within 1.5x of the floor.
func BenchmarkFreshEpisode(b *testing.B) {
	srv := serveGridsim(b)
	env, load := directEnv(b) // also makes sure the env binary is built
	env.Close()
	abs, _ := filepath.Abs(gridsimDir)
	bd, err := bundle.Load(abs, bundle.Options{})
	if err != nil {
		b.Fatal(err)
	}
	envDef := bd.Envs["gridsim"]
	s := dial(b, srv.addr)

	floor := func() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
		cmd := exec.Command(filepath.Join(envDef.Dir, envDef.Command[0]))
		cmd.Dir = envDef.Dir
		cmd.Env = append(os.Environ(), "AGENTENV_PORT="+port)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := envclient.Connect(ctx, "http://127.0.0.1:"+port, envclient.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.CallTool(ctx, "load_day", load, 10*time.Second); err != nil {
			b.Fatal(err)
		}
		c.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}
	i := 0
	ctx := context.Background()
	episode := func() {
		if _, err := s.Reset(ctx, client.ResetRequest{Split: "eval", Index: i % 200}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Step(ctx, idleReply); err != nil {
			b.Fatal(err)
		}
		if res, err := s.Step(ctx, "done"); err != nil || !res.Done {
			b.Fatalf("final reply: %v (done %v)", err, res.Done)
		}
		i++
	}
	for range 5 { // warm both paths
		episode()
		floor()
	}
	b.ResetTimer()
	eps := make([]time.Duration, 0, b.N)
	floors := make([]time.Duration, 0, b.N)
	for range b.N {
		t := time.Now()
		episode()
		eps = append(eps, time.Since(t))
		t = time.Now()
		floor()
		floors = append(floors, time.Since(t))
	}
	b.StopTimer()
	ep50, fl50 := median(eps), median(floors)
	b.ReportMetric(float64(ep50.Microseconds())/1000, "episode-p50-ms")
	b.ReportMetric(float64(fl50.Microseconds())/1000, "floor-p50-ms")
	b.ReportMetric(float64(ep50)/float64(fl50), "x-floor")
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	slices.Sort(s)
	return s[len(s)/2]
}
