package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/agentenv/agentenv/core/dataset/skyrl"
	"github.com/agentenv/agentenv/core/eval"
)

// evalOptions are the flags of `agentenv eval`.
type evalOptions struct {
	split, modelURL, model, tokenizer, kwargs, toolFormat string
	concurrency, maxTokens, maxTurns, samples, limit      int
	temperature                                           float64
	out                                                   string
	resume, retryFailed, json                             bool
	sftOut                                                string
	sftMinReward                                          float64
	attempts, resetTimeout                                int
	tokenVar, apiKeyVar, extraBody                        string
	modelTimeout                                          time.Duration
	maxAnswerBytes                                        int64
}

// Exit codes of eval besides 0 (every rollout scored) and 1 (an error).
const (
	exitFailedRollouts = 2   // the eval finished, but some rollouts failed
	exitInterrupted    = 130 // stopped by a signal; --resume goes on
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func newEvalCmd(env Env) *cobra.Command {
	var o evalOptions
	cmd := &cobra.Command{
		Use:   "eval URL --model-url URL --model NAME --tokenizer DIR|ORG/NAME",
		Short: "Score a model on a split through an OpenAI-compatible endpoint; keep its best rollouts as SFT data",
		Long: `eval plays every task of a split on the agentenv server at URL against a
model behind an OpenAI-compatible chat endpoint (vLLM, SGLang, a proxy),
as training plays it: the prompt is the one 'agentenv skyrl rows' writes
(the task's tools in the system message as the model's chat template
renders them), the endpoint gets plain messages and no tools=, and each
reply goes to the server as the model wrote it, where the tool-call format
reads it.

It writes one JSON line per rollout to --out, shows a progress bar with
the live mean reward, and prints a summary: the mean reward with its
standard error, each score's mean, failures by cause, tool calls and
unparsed calls, and the time in the model and in the env. A rollout the
env fails is played again (--attempts); one the model fails is recorded
as failed. --resume goes on with an eval that was stopped.

Exit status: 0 when every rollout was scored, 2 when some failed (the
results are complete), 130 when interrupted, 1 on an error.
See docs/eval.md.`,
		Example: `  agentenv eval http://127.0.0.1:8200 --split eval \
    --model-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3-4B --tokenizer Qwen/Qwen3-4B \
    --chat-template-kwargs '{"enable_thinking": false}' --temperature 1.1 --max-turns 4 \
    --out results.jsonl --sft-out sft.parquet --sft-min-reward 0.9`,
		Args: oneArg("the agentenv server's URL", "agentenv eval http://127.0.0.1:8200 --split eval --model-url http://127.0.0.1:8000/v1 --model greedy --tokenizer Qwen/Qwen3-4B"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
			err := runEval(ctx, env, args[0], o, cmd.Flags().Changed, cmd.OutOrStdout(), cmd.ErrOrStderr())
			stop()
			var ee *exitError
			if errors.As(err, &ee) {
				if ee.err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), "agentenv:", ee.err)
				}
				os.Exit(ee.code)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.split, "split", "eval", "the split to play")
	f.StringVar(&o.modelURL, "model-url", "", "the endpoint's API base URL, such as http://127.0.0.1:8000/v1 (requests go to URL/chat/completions)")
	f.StringVar(&o.model, "model", "", "the model's name as the endpoint serves it")
	f.StringVar(&o.tokenizer, "tokenizer", "", "the model's tokenizer: a local folder or a Hugging Face model id (ORG/NAME); its chat template renders the tools into the prompt")
	f.StringVar(&o.kwargs, "chat-template-kwargs", "", `chat template kwargs as JSON, used to render the prompt and sent to the endpoint: '{"enable_thinking": false}'`)
	f.StringVar(&o.toolFormat, "tool-format", "hermes", "the tool-call format the server reads the replies in: "+strings.Join(skyrl.ToolFormats, ", ")+" or a tool-format plugin")
	f.IntVar(&o.concurrency, "concurrency", 64, "rollouts played at once")
	f.Float64Var(&o.temperature, "temperature", 0, "sampling temperature (default: the endpoint's, for vLLM the model's generation config)")
	f.IntVar(&o.maxTokens, "max-tokens", 0, "most tokens a reply may have (default: the endpoint's)")
	f.IntVar(&o.maxTurns, "max-turns", 4, "model replies an episode may take before it is scored (0: the task's own limit)")
	f.IntVar(&o.samples, "samples", 1, "rollouts per task")
	f.IntVar(&o.limit, "limit", 0, "play only the split's first N tasks (0: all)")
	f.StringVar(&o.out, "out", "results.jsonl", "the results file: one JSON line per rollout")
	f.BoolVar(&o.resume, "resume", false, "go on with the eval in --out: play only the rollouts it lacks")
	f.BoolVar(&o.retryFailed, "retry-failed", false, "with --resume: play the failed rollouts in --out again")
	f.BoolVar(&o.json, "json", false, "print the summary as JSON")
	f.StringVar(&o.sftOut, "sft-out", "", "write the rollouts scoring at least --sft-min-reward to this parquet file, as a conversational SFT dataset")
	f.Float64Var(&o.sftMinReward, "sft-min-reward", 1, "the least reward a rollout needs to go into --sft-out")
	f.IntVar(&o.attempts, "attempts", 3, "episodes a rollout may take when the env fails it")
	f.IntVar(&o.resetTimeout, "reset-timeout", 600, "seconds after a rollout's start past which no new attempt starts; a reset waits for a busy server until then")
	f.StringVar(&o.tokenVar, "token-var", "AGENTENV_TOKEN", "environment variable holding the agentenv server's token")
	f.StringVar(&o.apiKeyVar, "api-key-var", "OPENAI_API_KEY", "environment variable holding the endpoint's API key (sent as a Bearer token when set)")
	f.StringVar(&o.extraBody, "extra-body", "", `more request fields for the endpoint, as a JSON object: '{"top_p": 0.95, "seed": 1}'`)
	f.DurationVar(&o.modelTimeout, "model-timeout", 10*time.Minute, "the longest one model request may take; past it the rollout fails")
	f.Int64Var(&o.maxAnswerBytes, "max-answer-bytes", eval.DefaultMaxAnswerBytes, "the largest answer body the endpoint may send; past it the rollout fails (each answer in flight holds up to about twice this)")
	markRequired(cmd, "model-url", "model", "tokenizer")
	return cmd
}

func runEval(ctx context.Context, env Env, url string, o evalOptions, changed func(string) bool, stdout, stderr io.Writer) error {
	token := env.Getenv(o.tokenVar)
	if token == "" && changed("token-var") {
		return fmt.Errorf("--token-var %s: the variable is empty; export the server's token in it", o.tokenVar)
	}
	kwargs, err := skyrl.ParseKwargs(o.kwargs)
	if err != nil {
		return fmt.Errorf("--chat-template-kwargs: %w", err)
	}
	if o.extraBody != "" && !json.Valid([]byte(o.extraBody)) {
		return fmt.Errorf("--extra-body: not valid JSON: %s", o.extraBody)
	}
	if changed("sft-min-reward") && o.sftOut == "" {
		return errors.New("--sft-min-reward goes with --sft-out")
	}
	mo := eval.OpenAIOptions{URL: o.modelURL, Model: o.model, APIKey: env.Getenv(o.apiKeyVar), MaxTokens: o.maxTokens,
		Extra: json.RawMessage(o.extraBody), Timeout: o.modelTimeout, Retries: 2, Concurrency: o.concurrency, MaxAnswerBytes: o.maxAnswerBytes}
	if changed("temperature") {
		mo.Temperature = &o.temperature
	}
	if strings.TrimSpace(o.kwargs) != "" {
		mo.ChatTemplateKwargs = json.RawMessage(o.kwargs)
	}
	model, err := eval.NewOpenAI(mo)
	if err != nil {
		return err
	}
	// A model endpoint that is down would fail every rollout, each after
	// its env was deployed: ask it first.
	if err := model.Check(ctx); err != nil {
		return err
	}
	// The chat template `agentenv skyrl rows` loads, found the same way.
	_, cfg, err := loadChatTemplate(o.tokenizer, stderr)
	if err != nil {
		return fmt.Errorf("--tokenizer %s: %w", o.tokenizer, err)
	}
	tmpl, err := skyrl.NewChatTemplate(cfg)
	if err != nil {
		return fmt.Errorf("--tokenizer %s: %w", o.tokenizer, err)
	}
	defer tmpl.Close() // its worker processes
	bar := newProgressBar(stderr)
	eo := eval.Options{
		Server: url, Token: token, Split: o.split, Limit: o.limit, Samples: o.samples, Concurrency: o.concurrency,
		MaxTurns: o.maxTurns, ToolFormat: o.toolFormat, Attempts: o.attempts, ResetTimeout: time.Duration(o.resetTimeout) * time.Second,
		Model: model, ModelName: o.model, Template: tmpl, Kwargs: kwargs,
		Out: o.out, Resume: o.resume, RetryFailed: o.retryFailed, SFTOut: o.sftOut, SFTMinReward: o.sftMinReward,
		Progress:    bar.update,
		OnPreparing: waitingNote(bar),
		Log:         hclog.New(&hclog.LoggerOptions{Name: "eval", Output: bar, Level: hclog.Warn}),
	}
	sum, err := eval.Run(ctx, eo)
	bar.finish()
	if sum == nil || (err != nil && sum.Rollouts == 0 && ctx.Err() == nil) {
		return explainServerError(url, err, o.tokenVar, token != "")
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(sum); jerr != nil {
			return jerr
		}
	} else {
		writeSummary(stdout, sum, o.out)
	}
	switch {
	case sum.Interrupted && ctx.Err() != nil:
		return &exitError{exitInterrupted, err}
	case err != nil:
		return err
	case sum.Failed > 0:
		return &exitError{code: exitFailedRollouts}
	}
	return nil
}

// writeSummary prints the summary for people.
func writeSummary(w io.Writer, s *eval.Summary, out string) {
	fmt.Fprintf(w, "model %s on split %s (tool format %s): %d of %d rollouts, %d scored, %d failed\n",
		s.Model, s.Split, s.ToolFormat, s.Rollouts, s.Expected, s.Scored, s.Failed)
	fmt.Fprintf(w, "  mean reward    %.3f ± %.3f (standard error over %d rollouts", s.MeanReward, s.StdErr, s.Rollouts)
	if s.Failed > 0 {
		fmt.Fprintf(w, ", a failed one counting 0; %.3f over the %d scored", s.MeanScored, s.Scored)
	}
	fmt.Fprintln(w, ")")
	ids := make([]string, 0, len(s.Scores))
	for id := range s.Scores {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(w, "  score/%-8s %.3f\n", id, s.Scores[id])
	}
	if s.Failed > 0 {
		causes := make([]string, 0, len(s.Failures))
		for c := range s.Failures {
			causes = append(causes, c)
		}
		sort.Strings(causes)
		for _, c := range causes {
			fmt.Fprintf(w, "  %-14s %d, e.g. %s\n", "failed ("+c+")", s.Failures[c], s.FailureExamples[c])
		}
	}
	if s.Replayed > 0 {
		fmt.Fprintf(w, "  replayed       %d rollouts the env failed at least once\n", s.Replayed)
	}
	perRollout := 0.0
	if s.Scored > 0 {
		perRollout = float64(s.ToolCalls) / float64(s.Scored)
	}
	fmt.Fprintf(w, "  tool calls     %d (%.2f a scored rollout, %.2f turns); unparsed %d, invalid %d, tool errors %d\n",
		s.ToolCalls, perRollout, s.MeanTurns, s.UnparsedCalls, s.InvalidCalls, s.ToolErrors)
	for i, r := range s.UnparsedReasons {
		if i == 5 {
			fmt.Fprintf(w, "    and %d more reasons (see the results file)\n", len(s.UnparsedReasons)-i)
			break
		}
		fmt.Fprintf(w, "    %5d× %s\n", r.Count, r.Reason)
	}
	fmt.Fprintf(w, "  time           a rollout %.2f s in the model, %.2f s in the env (of %.2f s); this run %.1f s\n",
		s.MeanModelS, s.MeanEnvS, s.MeanWallS, s.WallS)
	if s.CompletionTokens > 0 {
		fmt.Fprintf(w, "  tokens         %d generated\n", s.CompletionTokens)
	}
	fmt.Fprintf(w, "  results        %s (%d played now, %d resumed", out, s.Played, s.Resumed)
	if s.Retried > 0 {
		fmt.Fprintf(w, ", %d failed ones played again", s.Retried)
	}
	fmt.Fprintln(w, ")")
	if s.SFT != nil {
		fmt.Fprintf(w, "  sft            %s: %d rollouts with reward ≥ %g\n", s.SFT.File, s.SFT.Rows, s.SFT.MinReward)
	}
}
