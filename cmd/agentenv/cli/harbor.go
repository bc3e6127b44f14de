package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/oracle"
	"github.com/agentenv/agentenv/core/runtime"
)

func newHarborCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "harbor",
		Short: "Work with Harbor datasets (Terminal-Bench, SWE-bench, ... task folders)",
	}
	var o struct {
		sandbox, reward, tasks string
		sandboxConfig          []string
		parallel               int
		json                   bool
	}
	check := &cobra.Command{
		Use:   "check DATASET",
		Short: "Play every task with its solution/solve.sh (expects reward 1) and with no action (expects less)",
		Long: `check is the tool a dataset author runs before training: it loads a Harbor
dataset as serve does, builds the tasks' images, and plays each task twice
through the same engine, sandbox and verifier a trainer's episodes use:
once with the task's reference solution (solution/ written into the
container with the editor tool, solve.sh run with the shell tool), once
with an agent that does nothing. A sound task scores 1 with the oracle and
less without it.

It prints a table per task: built, the oracle's reward, the null agent's
reward, and the oracle's deploy, solve and verify seconds; with a failure,
why. Exit status: 0 when every task is sound, 2 when some are not, 1 on
an error. See docs/harbor.md.`,
		Example: `  agentenv harbor check examples/harbor
  agentenv harbor check ./terminal-bench --tasks 'hello-*' --parallel 4 --json`,
		Args: oneArg("the Harbor dataset folder", "agentenv harbor check examples/harbor"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !bundle.IsHarbor(args[0]) {
				if _, err := os.Stat(args[0]); err != nil {
					return fmt.Errorf("harbor check: %w", err)
				}
				return fmt.Errorf("harbor check: %s is not a Harbor dataset: no task folder (with task.toml) in it or its subfolders", args[0])
			}
			cfg, err := parseSandboxConfig(o.sandboxConfig)
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if len(cfg) > 0 {
				if raw, err = json.Marshal(cfg); err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log := env.logger(cmd, hclog.Warn)
			rt, err := runtime.Open(ctx, args[0], runtime.Options{
				Sandbox: o.sandbox, SandboxConfig: raw, Reward: o.reward, ToolFormat: "hermes",
				Logger: log, Plugins: pluginHostOptions(log),
			})
			if err != nil {
				return err
			}
			defer rt.Close(context.WithoutCancel(ctx))
			var tasks []*bundle.Task
			for _, t := range rt.Bundle.Tasks {
				if ok, _ := path.Match(o.tasks, t.ID); o.tasks == "" || ok {
					tasks = append(tasks, t)
				}
			}
			if len(tasks) == 0 {
				return fmt.Errorf("harbor check: no task matches --tasks %q", o.tasks)
			}
			errOut := cmd.ErrOrStderr()
			fmt.Fprintf(errOut, "building the images of %d tasks (once per build context)...\n", len(tasks))
			began := time.Now()
			if err := rt.Prepare(ctx, nil); err != nil {
				// A task whose image does not build is reported in its row.
				fmt.Fprintf(errOut, "some images did not build: %v\n", err)
			}
			fmt.Fprintf(errOut, "built in %s; checking %d tasks, %d at once\n", time.Since(began).Round(time.Second), len(tasks), max(o.parallel, 1))
			n := 0
			rows := oracle.Check(ctx, rt.Engine, tasks, oracle.Options{Parallel: o.parallel, Done: func(r oracle.Row) {
				n++
				verdict := "ok"
				if !r.OK() {
					verdict = "NOT OK"
				}
				fmt.Fprintf(errOut, "[%d/%d] %s: %s\n", n, len(tasks), r.Task, verdict)
			}})
			out := cmd.OutOrStdout()
			if o.json {
				enc := json.NewEncoder(out)
				for _, r := range rows {
					if err := enc.Encode(r); err != nil {
						return err
					}
				}
			} else {
				printOracleTable(out, rows)
			}
			bad := 0
			for _, r := range rows {
				if !r.OK() {
					bad++
				}
			}
			if ctx.Err() != nil {
				return &exitError{code: exitInterrupted, err: fmt.Errorf("harbor check: interrupted")}
			}
			if bad > 0 {
				return &exitError{code: exitFailedRollouts, err: fmt.Errorf("harbor check: %d of %d tasks are not sound (above)", bad, len(rows))}
			}
			return nil
		},
	}
	check.Flags().StringVar(&o.sandbox, "sandbox", runtime.DefaultSandbox, "the sandbox plugin: local (Docker) or k8s; process mode cannot run Harbor tasks")
	check.Flags().StringArrayVar(&o.sandboxConfig, "sandbox-config", nil, "the sandbox's configuration: key=value, or a JSON/TOML file (repeatable)")
	check.Flags().StringVar(&o.reward, "reward", "mean", "how a task's scores become its reward (reward.json may hold several): a reward plugin, or score:<name>")
	check.Flags().StringVar(&o.tasks, "tasks", "", "check only the tasks whose id matches this glob pattern")
	check.Flags().IntVar(&o.parallel, "parallel", 2, "tasks checked at once")
	check.Flags().BoolVar(&o.json, "json", false, "print one JSON object per task instead of the table")
	cmd.AddCommand(check)
	return cmd
}

func printOracleTable(out io.Writer, rows []oracle.Row) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TASK\tBUILT\tORACLE\tNULL\tDEPLOY\tSOLVE\tVERIFY\tRESULT")
	reward := func(r *float64) string {
		if r == nil {
			return "-"
		}
		return fmt.Sprintf("%.3g", *r)
	}
	for _, r := range rows {
		verdict := "ok"
		switch {
		case r.Error != "":
			verdict = r.Error
		case r.Oracle == nil || *r.Oracle != 1:
			verdict = "the oracle does not score 1"
		case r.Null == nil || *r.Null >= 1:
			verdict = "doing nothing scores 1: the tests check nothing the agent must do"
		}
		built := "no"
		if r.Built {
			built = "yes"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%.2fs\t%.2fs\t%.2fs\t%s\n", r.Task, built, reward(r.Oracle), reward(r.Null),
			r.Deploy, r.Solve, r.Verify, firstLine(verdict))
	}
	w.Flush()
	for _, r := range rows {
		if r.OracleOutput != "" && !r.OK() {
			fmt.Fprintf(out, "\n%s: the oracle's tool results end with:\n%s\n", r.Task, r.OracleOutput)
		}
	}
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}
