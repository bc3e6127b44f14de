// Command gridsim-baseline plays GridSim's scripted policies over a split
// and prints their mean grade:
//
//	go run ./cmd/gridsim-baseline --policy greedy --split eval
//	go run ./cmd/gridsim-baseline --policy all --split eval --markdown
//
// Run it in examples/gridsim, or point --bundle at the bundle.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/core/bundle"

	"github.com/agentenv/agentenv/examples/gridsim/baseline"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gridsim-baseline:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("gridsim-baseline", flag.ContinueOnError)
	dir := fs.String("bundle", ".", "the GridSim bundle's folder")
	policy := fs.String("policy", "greedy", "policy: "+strings.Join(baseline.Names, ", ")+", or all")
	split := fs.String("split", "eval", "split to play: all, train or eval")
	limit := fs.Int("limit", 0, "play only the split's first N tasks (0 = all)")
	parallel := fs.Int("parallel", 4, "episodes played at once")
	markdown := fs.Bool("markdown", false, "print a markdown table")
	verbose := fs.Bool("v", false, "print each task's grade")
	via := fs.String("via", "engine", "engine: real episodes (episode engine, local process sandbox, hermes replies); mcp: straight to the env over MCP, no engine")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	names := []string{*policy}
	if *policy == "all" {
		names = baseline.Names
	}
	var policies []baseline.Policy
	for _, n := range names {
		p, err := baseline.ByName(n)
		if err != nil {
			return err
		}
		policies = append(policies, p)
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	b, err := bundle.Load(abs, bundle.Options{})
	if err != nil {
		return err
	}
	s, err := b.Split(*split)
	if err != nil {
		return err
	}
	tasks := s.Tasks
	if *limit > 0 && *limit < len(tasks) {
		tasks = tasks[:*limit]
	}

	var runner baseline.Runner
	switch *via {
	case "engine":
		log := hclog.New(&hclog.LoggerOptions{Name: "gridsim-baseline", Output: os.Stderr, Level: hclog.Warn})
		loc, err := baseline.LocalEngine(ctx, abs, "", log)
		if err != nil {
			return err
		}
		defer loc.Close(context.WithoutCancel(ctx))
		runner = &baseline.Engine{Player: loc.Engine}
	case "mcp":
		runner = &baseline.Direct{Bundle: b}
	default:
		return fmt.Errorf("--via %q: want engine or mcp", *via)
	}
	var sums []baseline.Summary
	for _, p := range policies {
		results, err := baseline.RunAll(ctx, runner, tasks, p, *parallel)
		if err != nil {
			return err
		}
		if *verbose {
			for _, r := range results {
				if r.Err != nil {
					fmt.Fprintf(stdout, "%s\t%s\tfailed: %v\n", p.Name(), r.TaskID, r.Err)
				} else {
					fmt.Fprintf(stdout, "%s\t%s\t%.4f\t%v\n", p.Name(), r.TaskID, r.Grade, r.Schedule)
				}
			}
		}
		for _, r := range baseline.Failures(results, 3) {
			fmt.Fprintf(os.Stderr, "%s: %s failed: %v\n", p.Name(), r.TaskID, r.Err)
		}
		sums = append(sums, baseline.Summarize(p.Name(), results))
	}
	printSummaries(stdout, *split, sums, *markdown)
	for _, s := range sums {
		if s.Failed > 0 {
			return fmt.Errorf("%s: %d of %d tasks failed", s.Policy, s.Failed, s.Tasks)
		}
	}
	return nil
}

func printSummaries(w io.Writer, split string, sums []baseline.Summary, markdown bool) {
	if markdown {
		fmt.Fprintf(w, "| policy | %s days | mean grade | min | max | graded 1 | graded 0.2 |\n", split)
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
		for _, s := range sums {
			fmt.Fprintf(w, "| %s | %d | %.3f | %.3f | %.3f | %d | %d |\n", s.Policy, s.Tasks-s.Failed, s.Mean, s.Min, s.Max, s.Exact, s.Idle)
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "policy\tsplit\ttasks\tfailed\tmean grade\tmin\tmax\tgraded 1\tgraded 0.2")
	for _, s := range sums {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.4f\t%.4f\t%.4f\t%d\t%d\n", s.Policy, split, s.Tasks, s.Failed, s.Mean, s.Min, s.Max, s.Exact, s.Idle)
	}
	tw.Flush()
}
