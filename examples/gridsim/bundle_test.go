package gridsim_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/core/bundle"

	"github.com/agentenv/agentenv/examples/gridsim/days"
	"github.com/agentenv/agentenv/internal/servetest"
)

// The bundle loads under core/bundle's strict rules with the splits and
// tasks the docs promise, and every task's setup and prompt carry its
// day exactly.
func TestBundleLoads(t *testing.T) {
	b, err := bundle.Load(".", bundle.Options{})
	if err != nil {
		t.Fatalf("bundle.Load: %v", err)
	}
	if len(b.Warnings) > 0 {
		t.Errorf("warnings: %v", b.Warnings)
	}
	if !strings.HasPrefix(b.Description, "GridSim: run a grid battery") {
		t.Errorf("description = %q", b.Description)
	}
	sizes := map[string]int{}
	for _, s := range b.Splits {
		sizes[s.Name] = len(s.Tasks)
	}
	want := map[string]int{"all": 2200, "train": 2000, "eval": 200}
	for name, n := range want {
		if sizes[name] != n {
			t.Errorf("split %s has %d tasks, want %d (splits: %v)", name, sizes[name], n, sizes)
		}
	}
	if len(sizes) != len(want) {
		t.Errorf("splits = %v, want %v", sizes, want)
	}
	if n := len(b.Toolsets()); n != 1 {
		t.Errorf("%d toolsets, want 1", n)
	}
	env := b.Envs["gridsim"]
	if env == nil || env.Image == "" || len(env.Command) == 0 || len(env.Build) == 0 {
		t.Fatalf("env gridsim = %+v: want image, command and build", env)
	}

	eval, err := b.Split("eval")
	if err != nil {
		t.Fatal(err)
	}
	for i, task := range eval.Tasks {
		if want := fmt.Sprintf("day/eval-%03d", i+1); task.ID != want {
			t.Fatalf("eval task %d is %s, want %s", i, task.ID, want)
		}
	}

	for _, task := range b.Tasks {
		load, play := task.Step("load"), task.Step("play")
		if load == nil || play == nil || task.Step("grade") == nil {
			t.Fatalf("%s: steps load, play and grade not all present", task.ID)
		}
		var args struct {
			PowerMW       int       `json:"power_mw"`
			CapacityMWh   int       `json:"capacity_mwh"`
			EfficiencyPct int       `json:"efficiency_pct"`
			StartMWh      int       `json:"start_mwh"`
			Prices        []float64 `json:"prices"`
		}
		if err := json.Unmarshal(load.Arguments, &args); err != nil {
			t.Fatalf("%s: load_day arguments %s: %v", task.ID, load.Arguments, err)
		}
		if len(args.Prices) != days.Hours || args.PowerMW < 1 || args.CapacityMWh < args.PowerMW {
			t.Fatalf("%s: load_day arguments %s", task.ID, load.Arguments)
		}
		for _, p := range args.Prices {
			if _, err := days.CentsOf(p); err != nil {
				t.Fatalf("%s: %v", task.ID, err)
			}
		}
		// Every price, in the same order, is in the prompt.
		rest := play.Prompt
		for h, p := range args.Prices {
			c, _ := days.CentsOf(p)
			line := "hour " + strconv.Itoa(h) + ": " + days.Cents(c).String()
			i := strings.Index(rest, line)
			if i < 0 {
				t.Fatalf("%s: prompt lacks %q", task.ID, line)
			}
			rest = rest[i+len(line):]
		}
		if strings.Contains(play.Prompt, "<") || strings.Contains(play.SystemPrompt, "<") {
			t.Fatalf("%s: an unfilled placeholder is left in the prompt", task.ID)
		}
		mw := strconv.Itoa(args.PowerMW) + " MW"
		if !strings.Contains(play.Prompt, "power: "+mw) || !strings.Contains(play.Prompt, "capacity: "+strconv.Itoa(args.CapacityMWh)+" MWh") ||
			!strings.Contains(play.Prompt, "efficiency: "+strconv.Itoa(args.EfficiencyPct)+"%") ||
			!strings.Contains(play.Prompt, "start of hour 0: "+strconv.Itoa(args.StartMWh)+" MWh") {
			t.Fatalf("%s: prompt does not state the battery of its load_day arguments:\n%s", task.ID, play.Prompt)
		}
	}
}

// `agentenv bundle check` accepts the bundle and prints its splits.
func TestAgentenvBundleCheck(t *testing.T) {
	bin := servetest.Binary(t)
	out, err := exec.Command(bin, "bundle", "check", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("agentenv bundle check: %v\n%s", err, out)
	}
	for _, want := range []string{"bundle gridsim", "all    2200 tasks", "eval   200 tasks", "train  2000 tasks", "toolsets (1)", "hidden: gridsim/grade,gridsim/load_day"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("bundle check output lacks %q:\n%s", want, out)
		}
	}
}
