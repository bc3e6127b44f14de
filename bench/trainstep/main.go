// Command trainstep plays what a SkyRL training step plays against a real
// `agentenv serve`, through the Go client, and reports where the time goes.
//
// A step is N rollouts of up to T turns each, C of them at once, in groups
// of G rollouts per task (SkyRL's n_samples_per_prompt); each rollout opens
// its own WebSocket session (as agentenv_skyrl's env does), resets its task,
// and answers each observation with the next scripted reply after a think
// time that stands for the model's generation. A rollout the env fails is
// played again from the start, up to --attempts, as AgentEnvGenerator does.
//
// For each sandbox it reports per rollout the env time by phase (from the
// final observation's times), per step the wall time, the server's CPU
// time and peak RSS (agentenv serve and its plugin processes), and floors
// measured in the same run: the sandbox's bare deploy (the env process
// started by hand, a bare `docker run`, the ECS stand-in's own container
// start, a bare pod) and a bare MCP tool call on an env; and the server's
// CPU per rollout by process, and the Go heap serve allocated.
// docs/performance.md has the results and the commands.
//
//	go run ./bench/trainstep --sandboxes process,docker,docker-warm,ecs -n 32 -c 8 -g 4 -t 4 --steps 2
//
// `trainstep sessions` measures one server holding thousands of sessions
// (sessions.go):
//
//	go run ./bench/trainstep sessions --idle 10000 --live 2000 --episodes 20000
//
// --reuse N plays every step twice, alternating: on the bundle's envs as
// they are (a fresh deploy per rollout) and on a copy whose envs declare
// reuse = N (reset between rollouts), and prints the ratios. The bundle is
// served from copies whose envs need no build (built here first, or
// --env-bin's prebuilt binary), so with --agentenv and --env-bin the
// command runs where there is no Go toolchain.
//
// --sandboxes k8s plays the step on the Kubernetes test cluster (`make
// k8s-up`), in a namespace of the run's own, its floor a bare pod through
// client-go; --k8s-config FILE (JSON) points it at another cluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

type options struct {
	bundle   string
	agentenv string
	split    string
	n, c, g  int
	turns    int
	steps    int
	think    time.Duration
	attempts int
	replies  []string
	floors   int
	cpuScale float64
	// reuse N > 1 plays each step twice, alternating: on the bundle as
	// it is and on a copy whose envs declare reuse = N (reuseBundle).
	reuse       int
	reuseBundle string
	envBin      string
}

func main() {
	do := run
	if len(os.Args) > 1 && os.Args[1] == "sessions" {
		do = func() error { return runSessions(os.Args[2:]) }
	}
	if err := do(); err != nil {
		fmt.Fprintln(os.Stderr, "trainstep:", err)
		os.Exit(1)
	}
}

func run() error {
	var o options
	var sandboxes, repliesFile string
	flag.StringVar(&sandboxes, "sandboxes", "process", "comma-separated: "+strings.Join(sandboxNames(), ", "))
	flag.StringVar(&o.bundle, "bundle", "examples/gridsim", "the bundle to serve (the scripted replies are GridSim's unless --replies)")
	flag.StringVar(&o.agentenv, "agentenv", "", "agentenv binary (default: built from this checkout)")
	flag.StringVar(&o.split, "split", "train", "split the rollouts' tasks come from")
	flag.IntVar(&o.n, "n", 32, "rollouts per step")
	flag.IntVar(&o.c, "c", 8, "rollouts at once (SkyRL's max_env_workers)")
	flag.IntVar(&o.g, "g", 4, "rollouts per task (n_samples_per_prompt)")
	flag.IntVar(&o.turns, "t", 4, "turns at most per rollout (the reset's max_turns)")
	flag.IntVar(&o.steps, "steps", 2, "steps per sandbox (the first includes the cold start)")
	flag.DurationVar(&o.think, "think", 0, "time the scripted model takes per reply")
	flag.IntVar(&o.attempts, "attempts", 3, "attempts per rollout (replays of rollouts the env failed)")
	flag.StringVar(&repliesFile, "replies", "", "file of model replies, one JSON string per line, played in order (the last one ends the episode)")
	flag.IntVar(&o.floors, "floors", 8, "bare deploys and MCP calls measured per floor")
	flag.IntVar(&o.reuse, "reuse", 0, "also play every step on a copy of the bundle whose envs declare reuse = N (N >= 2), alternating with the fresh-env step, and print both and their ratios")
	flag.StringVar(&o.envBin, "env-bin", "", "a prebuilt env binary to run instead of building the bundle's env (for a machine without Go)")
	flag.StringVar(&k8sConfig, "k8s-config", "", "the k8s sandbox's settings file (JSON, with kubeconfig and namespace), for --sandboxes k8s (default: the test cluster of `make k8s-up`, a namespace of its own)")
	flag.Parse()
	if o.n < 1 || o.c < 1 || o.g < 1 || o.turns < 1 || o.steps < 1 || o.attempts < 1 {
		return fmt.Errorf("-n, -c, -g, -t, --steps and --attempts must be at least 1")
	}
	if o.reuse == 1 || o.reuse < 0 {
		return fmt.Errorf("--reuse %d: give N >= 2 episodes per deploy, or leave it out", o.reuse)
	}
	var err error
	if o.replies, err = loadReplies(repliesFile); err != nil {
		return err
	}
	work, err := o.prepare("trainstep-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	name := filepath.Base(o.bundle)
	if o.bundle, o.reuseBundle, err = servedBundles(ctx, o, work); err != nil {
		return err
	}

	fmt.Printf("# trainstep: %d rollouts x up to %d turns, %d at once, groups of %d, think %s, %d steps; bundle %s; %d CPUs; load average %s\n\n",
		o.n, o.turns, o.c, o.g, o.think, o.steps, name, numCPU(), loadAvg())
	if o.reuse > 1 {
		fmt.Printf("Each step is played twice, alternating: on fresh envs, then on envs that declare reuse = %d (the same tasks).\n\n", o.reuse)
	}
	for _, name := range strings.Split(sandboxes, ",") {
		sb, ok := sandboxByName(strings.TrimSpace(name))
		if !ok {
			return fmt.Errorf("no sandbox %q (have: %s)", name, strings.Join(sandboxNames(), ", "))
		}
		rep, err := measure(ctx, o, sb, work)
		if err != nil {
			return fmt.Errorf("%s: %w", sb.name, err)
		}
		rep.print(os.Stdout, o)
	}
	return nil
}

// measure serves the bundle on sb, measures its floors, and plays the steps.
// prepare makes the bundle's path absolute and a work folder (the
// caller removes it), building agentenv there unless --agentenv named one.
func (o *options) prepare(prefix string) (work string, err error) {
	if o.bundle, err = filepath.Abs(o.bundle); err != nil {
		return "", err
	}
	if work, err = os.MkdirTemp("", prefix); err != nil {
		return "", err
	}
	if o.agentenv == "" {
		if o.agentenv, err = buildAgentenv(work); err != nil {
			os.RemoveAll(work)
			return "", err
		}
	}
	return work, nil
}

func measure(ctx context.Context, o options, sb sandboxKind, work string) (*report, error) {
	dir := filepath.Join(work, sb.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	setup, err := sb.setup(ctx, o, dir)
	if err != nil {
		return nil, err
	}
	defer setup.close()
	rep := &report{sandbox: sb.name, floorName: sb.floorName}
	if sb.floor != nil {
		if rep.floorDeploy, rep.floorCall, err = sb.floor(ctx, o, setup); err != nil {
			return nil, fmt.Errorf("floor: %w", err)
		}
	}
	args := append(setup.args, "--max-concurrent-envs", fmt.Sprint(max(o.c, 1)*2))
	srv, err := startServe(ctx, o, setup.env, args...)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	var reuseSrv *server
	if o.reuseBundle != "" {
		ro := o
		ro.bundle = o.reuseBundle
		if reuseSrv, err = startServe(ctx, ro, setup.env, args...); err != nil {
			return nil, fmt.Errorf("serving the reuse copy: %w", err)
		}
		defer reuseSrv.stop()
		rep.reuse = o.reuse
	}
	if setup.warmed != nil {
		for _, s := range []*server{srv, reuseSrv} {
			if s == nil {
				continue
			}
			if err := setup.warmed(ctx, s); err != nil {
				return nil, err
			}
		}
	}
	for s := range o.steps {
		st, err := playStep(ctx, o, srv, s)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", s+1, err)
		}
		rep.steps = append(rep.steps, st)
		if reuseSrv == nil {
			continue
		}
		if st, err = playStep(ctx, o, reuseSrv, s); err != nil {
			return nil, fmt.Errorf("step %d, reuse = %d: %w", s+1, o.reuse, err)
		}
		rep.reuseSteps = append(rep.reuseSteps, st)
	}
	return rep, nil
}

// loadAvg is the machine's load average (1, 5, 15 min) from /proc.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
