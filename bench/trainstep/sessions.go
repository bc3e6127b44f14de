package main

// `trainstep sessions`: one server, many sessions. It opens --idle
// sessions without episodes, then --live sessions each playing an episode
// (process envs), steps them all, then plays --episodes episodes back to
// back, and reports the server's RSS and open files per session, step
// latency while the live ones are open, CPU per step, and whether RSS,
// fds, goroutines and temp dirs stay flat over the episodes.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentenv/agentenv/client"
)

type sessionsOptions struct {
	options
	live, idle, episodes, conc, samples int
	minAvailMiB                         int
}

func runSessions(args []string) error {
	var o sessionsOptions
	f := flag.NewFlagSet("sessions", flag.ExitOnError)
	f.StringVar(&o.bundle, "bundle", "examples/gridsim", "the bundle to serve (GridSim's scripted replies)")
	f.StringVar(&o.agentenv, "agentenv", "", "agentenv binary (default: built from this checkout)")
	f.StringVar(&o.split, "split", "train", "split the episodes' tasks come from")
	f.IntVar(&o.idle, "idle", 10000, "sessions opened without an episode")
	f.IntVar(&o.live, "live", 2000, "sessions each holding an episode (and its env process) at once")
	f.IntVar(&o.episodes, "episodes", 20000, "episodes played back to back after, for leaks")
	f.IntVar(&o.conc, "c", 64, "episodes at once in the back-to-back run (and resets at once while opening the live sessions)")
	f.IntVar(&o.samples, "samples", 10, "resource samples over the back-to-back run")
	f.IntVar(&o.minAvailMiB, "min-available", 3072, "stop opening live episodes when the machine's MemAvailable falls below this many MiB (a shared machine)")
	if err := f.Parse(args); err != nil {
		return err
	}
	// Replays as a trainer's: an env that fails to start on this loaded
	// machine is played again, and counted.
	o.replies, o.attempts = gridsimReplies, 3
	work, err := o.prepare("trainstep-sessions-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	ctx := context.Background()
	state, tmp := filepath.Join(work, "state"), filepath.Join(work, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	// A temp folder of its own: the envs' temp dirs are counted there.
	srv, err := startServe(ctx, o.options, []string{"TMPDIR=" + tmp}, "--sandbox-config", "mode=process", "--sandbox-config", "state_dir="+state,
		"--max-concurrent-envs", fmt.Sprint(max(o.live, o.conc)), "--max-connections", fmt.Sprint(o.idle+o.live+o.conc+64))
	if err != nil {
		return err
	}
	defer srv.stop()
	c, err := client.New(srv.url, client.Options{})
	if err != nil {
		return err
	}
	fmt.Printf("# trainstep sessions: %d idle, %d live, %d episodes back to back at %d; %d CPUs; ulimit -n of serve: %s\n\n",
		o.idle, o.live, o.episodes, o.conc, numCPU(), openFileLimit(srv.cmd.Process.Pid))
	base := sample(srv, state, tmp)
	fmt.Printf("baseline: %s\n\n", base)

	// Live sessions: each resets an episode (a process env each) and stays.
	before := base
	live, err := openSessions(ctx, c, o.live, o.conc)
	if err != nil {
		return fmt.Errorf("opening live sessions: %w", err)
	}
	start := time.Now()
	var resets, liveReplays atomic.Int64
	var lowMem atomic.Bool
	reset := make([]bool, len(live))
	err = parallel(len(live), o.conc, func(i int) error {
		if lowMem.Load() {
			return nil
		}
		if avail := memAvailable(); avail > 0 && avail < int64(o.minAvailMiB)<<20 {
			lowMem.Store(true)
			return nil
		}
		// An env that does not start in time on the loaded machine is
		// replayed on a fresh session, as a trainer does, and counted.
		var err error
		for attempt := 1; attempt <= o.attempts; attempt++ {
			if attempt > 1 {
				fmt.Fprintf(os.Stderr, "replay: live session %d attempt %d: %v\n", i, attempt-1, err)
				live[i].Close()
				liveReplays.Add(1)
				if live[i], err = c.Connect(ctx); err != nil {
					return err
				}
			}
			if _, err = live[i].Reset(ctx, client.ResetRequest{Split: o.split, Index: i % 2000, MaxTurns: 100}); err == nil {
				resets.Add(1)
				reset[i] = true
				return nil
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("resetting %d live sessions (%d done): %w", len(live), resets.Load(), err)
	}
	if n := int(resets.Load()); n < len(live) {
		// Only the sessions that hold an episode are measured and stepped.
		fmt.Printf("stopped at %d live episodes: MemAvailable fell below %d MiB\n", n, o.minAvailMiB)
		var kept []*client.Session
		for i, s := range live {
			if reset[i] {
				kept = append(kept, s)
			} else {
				s.Close()
			}
		}
		live = kept
	}
	withLive := sample(srv, state, tmp)
	fmt.Printf("%d live episodes (reset in %.1f s, %d replays): %s; per live episode: %s\n", len(live), time.Since(start).Seconds(), liveReplays.Load(), withLive, withLive.per(before, len(live)))
	fmt.Printf("their env processes: %s\n", withLive.envMem(before, len(live)))
	if len(live) > 0 {
		if err := stepLive(ctx, srv, live, o.conc); err != nil {
			return err
		}
	}
	closeAll(live)
	if err := waitFor(func() bool { return scrapeSum(srv.url, "agentenv_episodes_live", "") == 0 }, 5*time.Minute); err != nil {
		return fmt.Errorf("live episodes never went: %w", err)
	}

	// Idle sessions: connected, no episode.
	afterLive := sample(srv, state, tmp)
	idle, err := openSessions(ctx, c, o.idle, 64)
	if err != nil {
		return fmt.Errorf("opening idle sessions: %w", err)
	}
	withIdle := sample(srv, state, tmp)
	fmt.Printf("%d idle sessions: %s; per session: %s\n\n", len(idle), withIdle, withIdle.per(afterLive, len(idle)))
	closeAll(idle)

	// Episodes back to back.
	fmt.Println("| episodes | RSS MiB | fds | goroutines | temp dirs | env processes | replays |")
	fmt.Println("|---|---|---|---|---|---|---|")
	fmt.Printf("| 0 | %s | 0 |\n", sample(srv, state, tmp).row())
	var played, replays atomic.Int64
	chunk := max(o.episodes/o.samples, 1)
	for done := 0; done < o.episodes; done += chunk {
		n := min(chunk, o.episodes-done)
		err := parallel(n, o.conc, func(i int) error {
			r, err := playRollout(ctx, o.options, c, (done+i)%2000, fmt.Sprintf("leak-%d", done+i))
			replays.Add(int64(max(r.attempts-1, 0)))
			played.Add(1)
			return err
		})
		if err != nil {
			return err
		}
		_ = waitFor(func() bool { return scrapeSum(srv.url, "agentenv_episodes_live", "") == 0 }, time.Minute)
		fmt.Printf("| %d | %s | %d |\n", played.Load(), sample(srv, state, tmp).row(), replays.Load())
	}
	return nil
}

// stepLive steps every live session three times (get_prices), conc at
// once, while all stay live, and prints the latency and the server's CPU
// per step.
func stepLive(ctx context.Context, srv *server, live []*client.Session, conc int) error {
	var mu sync.Mutex
	var lat []time.Duration
	cpu0 := srv.usage().cpu
	start := time.Now()
	const stepsEach = 3
	err := parallel(len(live)*stepsEach, conc, func(i int) error {
		t := time.Now()
		_, err := live[i%len(live)].Step(ctx, gridsimReplies[0])
		mu.Lock()
		lat = append(lat, time.Since(t))
		mu.Unlock()
		return err
	})
	if err != nil {
		return fmt.Errorf("stepping the live sessions: %w", err)
	}
	took := time.Since(start)
	cpu := srv.usage().cpu - cpu0
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("%d steps at %d at once while %d live: p50 %.2f ms, p99 %.2f ms, %.0f steps/s; server CPU %.3f ms per step\n\n",
		len(lat), conc, len(live), ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), float64(len(lat))/took.Seconds(), ms(cpu)/float64(len(lat)))
	return nil
}

// resources is a sample of the server's resources.
type resources struct {
	rss, pluginRSS int64
	fds, pluginFDs int
	goroutines     float64
	heap           float64 // the Go heap in use (RSS keeps what a grown heap released)
	tempDirs       int
	envs           int
	// The env processes': RSS counts the binary's pages every process
	// shares; PSS splits them; anon is each one's own memory.
	envRSS, envPSS, envAnon int64
	envThreads              int
	memAvail                int64 // the machine's MemAvailable
}

func sample(srv *server, state, tmp string) resources {
	pid := srv.cmd.Process.Pid
	_, rss := procStat(pid)
	r := resources{rss: rss, fds: countFDs(pid), goroutines: scrapeSum(srv.url, "go_goroutines", ""),
		heap: scrapeSum(srv.url, "go_memstats_heap_inuse_bytes", "")}
	for _, p := range pluginChildren(pid) {
		_, prss := procStat(p)
		r.pluginRSS += prss
		r.pluginFDs += countFDs(p)
		envs := children(p)
		r.envs += len(envs)
		for _, e := range envs {
			m := smapsRollup(e)
			r.envRSS += m["Rss"]
			r.envPSS += m["Pss"]
			r.envAnon += m["Pss_Anon"]
			r.envThreads += threads(e)
		}
	}
	r.memAvail = memAvailable()
	r.tempDirs = countEntries(state) + countEntries(tmp)
	return r
}

func (r resources) String() string {
	return fmt.Sprintf("serve RSS %.1f MiB, %d fds, %.0f goroutines; plugins RSS %.1f MiB, %d fds; %d env processes, %d temp dirs",
		float64(r.rss)/(1<<20), r.fds, r.goroutines, float64(r.pluginRSS)/(1<<20), r.pluginFDs, r.envs, r.tempDirs)
}

func (r resources) per(base resources, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("serve %.1f KiB RSS (%.1f KiB Go heap in use), %.2f fds, %.1f goroutines; plugins %.1f KiB, %.2f fds",
		float64(r.rss-base.rss)/1024/float64(n), (r.heap-base.heap)/1024/float64(n), float64(r.fds-base.fds)/float64(n), (r.goroutines-base.goroutines)/float64(n),
		float64(r.pluginRSS-base.pluginRSS)/1024/float64(n), float64(r.pluginFDs-base.pluginFDs)/float64(n))
}

// envMem is what the env processes take, per live episode, and what the
// machine gave up (MemAvailable, which other jobs on it move too).
func (r resources) envMem(base resources, n int) string {
	if n == 0 || r.envs == 0 {
		return "-"
	}
	per := func(v int64) float64 { return float64(v) / (1 << 20) / float64(n) }
	return fmt.Sprintf("%d processes, %d threads (%.1f each); RSS %.2f MiB each, PSS %.2f MiB, anon %.2f MiB; machine MemAvailable %.0f -> %.0f MiB (%.2f MiB per live episode, server included)",
		r.envs, r.envThreads, float64(r.envThreads)/float64(r.envs), per(r.envRSS), per(r.envPSS), per(r.envAnon),
		float64(base.memAvail)/(1<<20), float64(r.memAvail)/(1<<20), per(base.memAvail-r.memAvail))
}

// smapsRollup is a process's /proc/PID/smaps_rollup, in bytes.
func smapsRollup(pid int) map[string]int64 {
	out := map[string]int64{}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return out
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[2] == "kB" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			out[strings.TrimSuffix(f[0], ":")] = v << 10
		}
	}
	return out
}

func threads(pid int) int {
	e, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return len(e)
}

// memAvailable is the machine's MemAvailable in bytes (0 if unknown).
func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "MemAvailable:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func (r resources) row() string {
	return fmt.Sprintf("%.1f (+ plugins %.1f) | %d (+ plugins %d) | %.0f | %d | %d",
		float64(r.rss)/(1<<20), float64(r.pluginRSS)/(1<<20), r.fds, r.pluginFDs, r.goroutines, r.tempDirs, r.envs)
}

func countFDs(pid int) int {
	e, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(e)
}

// children are pid's child processes.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		var child int
		if _, err := fmt.Sscan(e.Name(), &child); err == nil && ppid(child) == pid {
			out = append(out, child)
		}
	}
	return out
}

// countEntries counts what lies two levels under dir (the sandbox's state:
// one folder per env process).
func countEntries(dir string) int {
	n := 0
	top, _ := os.ReadDir(dir)
	for _, e := range top {
		n++
		if e.IsDir() {
			sub, _ := os.ReadDir(filepath.Join(dir, e.Name()))
			n += len(sub)
		}
	}
	return n
}

func openFileLimit(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Max open files") {
			return strings.Join(strings.Fields(l)[3:5], "/")
		}
	}
	return "?"
}

func openSessions(ctx context.Context, c *client.Client, n, conc int) ([]*client.Session, error) {
	out := make([]*client.Session, n)
	err := parallel(n, conc, func(i int) error {
		s, err := c.Connect(ctx)
		out[i] = s
		return err
	})
	if err != nil {
		closeAll(out)
		return nil, err
	}
	return out, nil
}

func closeAll(ss []*client.Session) {
	for _, s := range ss {
		if s != nil {
			s.Close()
		}
	}
}

// parallel runs fn(0..n-1), conc at once; the first error stops new work.
func parallel(n, conc int, fn func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range min(conc, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func waitFor(cond func() bool, within time.Duration) error {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", within)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}
