package main

import (
	"fmt"
	"io"
	"sort"
	"time"
)

// report is one sandbox's measurements.
type report struct {
	sandbox     string
	floorName   string
	floorDeploy []time.Duration
	floorCall   []time.Duration
	steps       []step
	// With --reuse: the same steps on envs that declare reuse = reuse,
	// each played right after its fresh-env step.
	reuse      int
	reuseSteps []step
}

// phases of the final observation's times, in the order they happen;
// tool is part of step.
var phases = []string{"queue", "deploy", "ready", "setup", "step", "tool", "verify"}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// seedStep is the step time SkyRL's page reports for 256 rollouts, against
// which the server's CPU per step is put.
const seedStep = 70 * time.Second

func (r *report) print(w io.Writer, o options) {
	fmt.Fprintf(w, "## %s\n\n", r.sandbox)
	floor := median(r.floorDeploy)
	if r.floorName == "" {
		fmt.Fprintf(w, "floor: none measured here for %s\n\n", r.sandbox)
	} else {
		fmt.Fprintf(w, "floor: bare deploy (%s) to MCP ready, %d of them %d at once, median: %.1f ms; bare MCP call (get_prices), median of %d: %.2f ms\n\n",
			r.floorName, len(r.floorDeploy), min(o.c, len(r.floorDeploy)), ms(floor), len(r.floorCall), ms(median(r.floorCall)))
	}
	printSteps(w, r.steps, floor)
	if r.reuse > 1 {
		fmt.Fprintf(w, "\n### %s, envs with reuse = %d (each step right after the fresh one above)\n\n", r.sandbox, r.reuse)
		printSteps(w, r.reuseSteps, floor)
		r.compare(w)
	}
	fmt.Fprintln(w)
}

// printSteps prints the steps' table and each step's CPU by process.
func printSteps(w io.Writer, steps []step, floor time.Duration) {
	fmt.Fprintln(w, "| step | wall s | rollouts | replays | failed | env s/rollout p50 | p99 | deploy p50 ms | ready p50 ms | step p50 ms (tool) | verify p50 ms | queue p50 ms | env/(floor+tool+setup+verify) | server CPU s | CPU ×256/N, % of 70 s | peak RSS MiB |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for i, st := range steps {
		var env, dep, rdy, stepT, tool, verify, queue, ratio []float64
		replays, failed := 0, 0
		for _, ro := range st.rollouts {
			replays += max(ro.attempts-1, 0)
			if ro.failed || ro.times == nil {
				failed++
				continue
			}
			t := ro.times
			total := 0.0
			for _, p := range phases {
				if p != "tool" {
					total += t[p]
				}
			}
			env = append(env, total)
			dep = append(dep, t["deploy"]*1e3)
			rdy = append(rdy, t["ready"]*1e3)
			stepT = append(stepT, t["step"]*1e3)
			tool = append(tool, t["tool"]*1e3)
			verify = append(verify, t["verify"]*1e3)
			queue = append(queue, t["queue"]*1e3)
			if floor > 0 {
				ratio = append(ratio, total/(floor.Seconds()+t["tool"]+t["setup"]+t["verify"]))
			}
		}
		fmt.Fprintf(w, "| %d | %.2f | %d | %d | %d | %.3f | %.3f | %.1f | %.1f | %.1f (%.1f) | %.1f | %.1f | %.2f | %.2f | %.3f | %.0f |\n",
			i+1, st.wall.Seconds(), len(st.rollouts), replays, failed, quantile(env, 0.5), quantile(env, 0.99),
			quantile(dep, 0.5), quantile(rdy, 0.5), quantile(stepT, 0.5), quantile(tool, 0.5), quantile(verify, 0.5), quantile(queue, 0.5),
			quantile(ratio, 0.5), st.cpu.Seconds(), 100*st.cpu.Seconds()*256/float64(len(st.rollouts))/seedStep.Seconds(), float64(st.peakRSS)/(1<<20))
	}
	for i, st := range steps {
		names := make([]string, 0, len(st.cpuBy))
		for k := range st.cpuBy {
			names = append(names, k)
		}
		sort.Strings(names)
		fmt.Fprintf(w, "step %d server CPU per rollout:", i+1)
		for _, k := range names {
			fmt.Fprintf(w, " %s %.2f ms;", k, ms(st.cpuBy[k])/float64(max(len(st.rollouts), 1)))
		}
		fmt.Fprintf(w, " serve allocated %.0f KiB per rollout\n", st.alloc/1024/float64(max(len(st.rollouts), 1)))
	}
}

// stepFigures are a step's medians and per-rollout CPU.
type stepFigures struct {
	envP50, deployP50, cpuPerRollout float64 // s, ms, ms
}

func figures(st step) stepFigures {
	var env, dep []float64
	for _, ro := range st.rollouts {
		if ro.failed || ro.times == nil {
			continue
		}
		total := 0.0
		for _, p := range phases {
			if p != "tool" {
				total += ro.times[p]
			}
		}
		env = append(env, total)
		dep = append(dep, ro.times["deploy"]*1e3)
	}
	return stepFigures{envP50: quantile(env, 0.5), deployP50: quantile(dep, 0.5),
		cpuPerRollout: ms(st.cpu) / float64(max(len(st.rollouts), 1))}
}

// compare prints reuse against fresh, step by step: each pair was played
// back to back on the same machine.
func (r *report) compare(w io.Writer) {
	fmt.Fprintf(w, "\n### %s, reuse = %d against fresh envs, step by step (each pair played back to back)\n\n", r.sandbox, r.reuse)
	fmt.Fprintln(w, "| step | server CPU ms/rollout fresh | reuse | **reuse ÷ fresh** | env s/rollout p50 fresh | reuse | reuse ÷ fresh | wall s fresh | reuse | reuse ÷ fresh | episodes on a reset env |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for i := range min(len(r.steps), len(r.reuseSteps)) {
		f, u := figures(r.steps[i]), figures(r.reuseSteps[i])
		fmt.Fprintf(w, "| %d | %.2f | %.2f | **%.2f** | %.3f | %.3f | %.2f | %.2f | %.2f | %.2f | %.0f of %d |\n", i+1,
			f.cpuPerRollout, u.cpuPerRollout, ratio(u.cpuPerRollout, f.cpuPerRollout),
			f.envP50, u.envP50, ratio(u.envP50, f.envP50),
			r.steps[i].wall.Seconds(), r.reuseSteps[i].wall.Seconds(), ratio(r.reuseSteps[i].wall.Seconds(), r.steps[i].wall.Seconds()),
			r.reuseSteps[i].reuses, len(r.reuseSteps[i].rollouts))
	}
	fmt.Fprintln(w)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
