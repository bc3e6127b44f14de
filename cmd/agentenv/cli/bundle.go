package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/runtime"
)

func newBundleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bundle",
		Short: "Work with bundles (folders of envs, tasks and evals)",
	}
	var reward, sandboxName string
	check := &cobra.Command{
		Use:   "check DIR",
		Short: "Load a bundle strictly and print its envs, splits and toolsets, or every problem",
		Long: `check loads a bundle exactly as serve does and prints what it holds: the
description, the envs, the splits with their task counts, and the toolsets.
A bundle with problems prints each with its file and line, and exits non-zero.
With --reward it also checks that every task can be rewarded that way, and
that a reward plugin of that name is installed and starts.
See docs/bundles.md.`,
		Example: `  agentenv bundle check examples/gridsim
  agentenv bundle check my-bundle --reward mean
  agentenv bundle check my-bundle --reward score:grade`,
		Args: oneArg("the bundle folder to check", "agentenv bundle check examples/gridsim"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("reward") {
				b, err := bundle.Load(args[0], bundle.Options{})
				if err != nil {
					return err
				}
				printBundle(cmd.OutOrStdout(), b)
				if err := b.CheckReward(""); err != nil {
					fmt.Fprintf(cmd.OutOrStdout(), "\nneeds a reward: %v\n", err)
				}
				return nil
			}
			// With a reward, open the bundle as serve does, so a reward
			// plugin that does not exist or does not start is found here.
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
			defer cancel()
			rt, err := runtime.Open(ctx, args[0], runtime.Options{Reward: reward, Sandbox: sandboxName})
			if err != nil {
				return err
			}
			defer rt.Close(context.WithoutCancel(ctx))
			printBundle(cmd.OutOrStdout(), rt.Bundle)
			fmt.Fprintf(cmd.OutOrStdout(), "\nreward %q: every task can be rewarded\n", reward)
			return nil
		},
	}
	check.Flags().StringVar(&reward, "reward", "", "check the bundle under this reward: a reward plugin name, or score:<step id>")
	check.Flags().StringVar(&sandboxName, "sandbox", runtime.DefaultSandbox, "with --reward: the sandbox plugin serve would use")
	cmd.AddCommand(check)
	return cmd
}

func printBundle(out io.Writer, b *bundle.Bundle) {
	fmt.Fprintf(out, "bundle %s\n", b.Name)
	if b.Description != "" {
		fmt.Fprintf(out, "  %s\n", b.Description)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "\nenvs (%d):\n", len(b.Envs))
	names := make([]string, 0, len(b.Envs))
	for n := range b.Envs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		e := b.Envs[n]
		var how []string
		if e.Image != "" {
			how = append(how, "image "+e.Image)
		}
		if len(e.Command) > 0 {
			how = append(how, "command "+strings.Join(e.Command, " "))
		}
		if len(e.Build) > 0 {
			how = append(how, "build "+strings.Join(e.Build, " "))
		}
		if e.Terminal {
			how = append(how, "terminal injected")
			if e.Workdir != "" {
				how = append(how, "workdir "+e.Workdir)
			}
			if e.NoInternet {
				how = append(how, "no internet")
			}
			if e.CPU > 0 {
				how = append(how, fmt.Sprintf("cpus %g", e.CPU))
			}
			if e.MemoryMB > 0 {
				how = append(how, fmt.Sprintf("memory %d MB", e.MemoryMB))
			}
			if e.StorageMB > 0 {
				how = append(how, fmt.Sprintf("storage %d MB", e.StorageMB))
			}
		} else {
			how = append(how, fmt.Sprintf("port %d", e.Port))
		}
		fmt.Fprintf(w, "  %s\t%s\n", n, strings.Join(how, ", "))
	}
	fmt.Fprintf(w, "\nsplits (%d):\n", len(b.Splits))
	for _, s := range b.Splits {
		counts := map[string]int{}
		for _, t := range s.Tasks {
			counts[t.Toolset]++
		}
		fmt.Fprintf(w, "  %s\t%d %s\t%d %s\n", s.Name, len(s.Tasks), plural(len(s.Tasks), "task"),
			len(counts), plural(len(counts), "toolset"))
	}
	ts := b.Toolsets()
	fmt.Fprintf(w, "\ntoolsets (%d):\n", len(ts))
	for _, t := range ts {
		fmt.Fprintf(w, "  %s\t%d %s\t%s\te.g. %s\n", t.ID, t.Count, plural(t.Count, "task"), describeToolset(t), t.Task.ID)
	}
	w.Flush()
	for _, warn := range b.Warnings {
		fmt.Fprintf(out, "warning: %s\n", warn)
	}
}

func describeToolset(t bundle.Toolset) string {
	envs := "no env"
	if len(t.Envs) > 0 {
		envs = "envs " + strings.Join(t.Envs, ",")
	}
	turns := make([]string, len(t.Turns))
	for i, tools := range t.Turns {
		switch {
		case tools == nil:
			turns[i] = "default"
		case len(tools) == 0:
			turns[i] = "none"
		default:
			turns[i] = strings.Join(tools, ",")
		}
	}
	s := envs + "; turns: " + strings.Join(turns, " | ")
	if len(t.Hidden) > 0 {
		s += "; hidden: " + strings.Join(t.Hidden, ",")
	}
	if t.EndTurn {
		s += "; +" + bundle.EndTurnTool
	}
	return s
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
