// Command inbox-play plays the inbox example's policies against a served
// bundle, over the OpenEnv WebSocket protocol, as a trainer's rollouts
// would: one session per task, replies in qwen3_coder. Start the server
// first:
//
//	agentenv serve examples/inbox --reward mean --tool-format qwen3_coder
//
// then, from examples/inbox:
//
//	go run ./cmd/inbox-play --policy all
//	go run ./cmd/inbox-play --policy scripted --task acme-invoice --show
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"

	"github.com/agentenv/agentenv/examples/inbox/policy"
	"github.com/agentenv/agentenv/examples/inbox/rollout"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "inbox-play:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("inbox-play", flag.ContinueOnError)
	fs.SetOutput(out)
	server := fs.String("url", "http://127.0.0.1:8200", "the server's base URL")
	shapes := fs.String("policy", "scripted", "scripted, reply, wrong, or all")
	split := fs.String("split", "eval", "the split whose tasks to play")
	task := fs.String("task", "", "play this one task instead of a split")
	format := fs.String("tool-format", "qwen3_coder", "the tool_format each reset names; the replies are written in qwen3_coder")
	maxTurns := fs.Int("max-turns", 0, "the trainer's turn cap: end each episode after this many replies (0: none)")
	show := fs.Bool("show", false, "print every rollout's messages")
	tokenVar := fs.String("token-var", "AGENTENV_TOKEN", "environment variable holding the server's token (unset: none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *maxTurns < 0 {
		return fmt.Errorf("--max-turns is %d; give 0 (no cap) or more", *maxTurns)
	}
	var plays []policy.Shape
	if *shapes == "all" {
		plays = policy.Shapes
	} else {
		for _, name := range strings.Split(*shapes, ",") {
			sh, err := policy.ParseShape(strings.TrimSpace(name))
			if err != nil {
				return err
			}
			plays = append(plays, sh)
		}
	}
	token := os.Getenv(*tokenVar)
	tasks := []string{*task}
	if *task == "" {
		var err error
		if tasks, err = rollout.Tasks(ctx, *server, token, *split); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "| policy | tasks | reward | score/answer-1 | score/answer-2 | tool calls | unparsed calls |\n|---|---|---|---|---|---|---|\n")
	for _, sh := range plays {
		var rows []rollout.Result
		for _, id := range tasks {
			res, err := rollout.Play(ctx, *server, token, rollout.Reset{TaskID: id, ToolFormat: *format, MaxTurns: *maxTurns}, policy.New(sh))
			if err != nil {
				return fmt.Errorf("policy %s: %w", sh, err)
			}
			if *show {
				fmt.Fprintf(out, "\n=== %s, policy %s: reward %v\n\n%s", id, sh, res.Reward, rollout.Render(res.Transcript))
				printMetrics(out, res.Metrics)
			}
			rows = append(rows, res)
		}
		if len(rows) == 0 {
			return errors.New("the split has no tasks")
		}
		m := means(rows)
		fmt.Fprintf(out, "| %s | %d | %.3f | %.3f | %.3f | %.1f | %.0f |\n", sh, len(rows), m["reward"],
			m["score/answer-1"], m["score/answer-2"], m["tool_calls"], m["unparsed_calls"]*float64(len(rows)))
	}
	return nil
}

// means averages the rewards and every metric over the rollouts.
func means(rows []rollout.Result) map[string]float64 {
	m := map[string]float64{}
	for _, r := range rows {
		m["reward"] += r.Reward
		for k, v := range r.Metrics {
			m[k] += v
		}
	}
	for k := range m {
		m[k] /= float64(len(rows))
	}
	return m
}

func printMetrics(out io.Writer, metrics map[string]float64) {
	keys := make([]string, 0, len(metrics))
	for k := range metrics {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(out, "  %s = %v\n", k, metrics[k])
	}
}
