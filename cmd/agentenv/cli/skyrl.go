package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agentenv/agentenv/core/dataset/skyrl"
)

// skyrlRowsOptions are the flags of `agentenv skyrl rows`.
type skyrlRowsOptions struct {
	tokenizer       string
	maxPromptLength int
	kwargs          string
	toolFormat      string
	tokenVar        string
	attempts        int
	resetTimeout    int
	splits          []string
	dataSource      string
}

func newSkyrlCmd(env Env) *cobra.Command {
	group := &cobra.Command{
		Use:   "skyrl",
		Short: "Train with SkyRL: write its dataset from a served bundle",
	}
	var o skyrlRowsOptions
	rows := &cobra.Command{
		Use:   "rows URL OUTDIR --tokenizer DIR|ORG/NAME --max-prompt-length N",
		Short: "Write a served bundle's tasks as SkyRL's dataset, one parquet file per split",
		Long: `rows reads the catalogue of the agentenv server at URL and writes
OUTDIR/<split>.parquet for each split: a row per task, its prompt with its
tools in the system message as the model's chat template renders tools=,
env_class "agentenv", the episode (split, index, task id, tool names) and
the server's settings. SkyRL's generator passes the template no tools, so
this is what shows the model its tools.

Each toolset's tools are listed once, which deploys one env of it. Every
prompt is checked (rendered with tools= and with the tools in its system
message: the same text) and counted, as SkyRL's prompt filter counts it
(without --chat-template-kwargs) and as its generator renders it (with
them), before any file is written. See docs/training-skyrl.md.`,
		Example: `  agentenv skyrl rows http://127.0.0.1:8200 data \
    --tokenizer Qwen/Qwen3-4B --max-prompt-length 3072 \
    --chat-template-kwargs '{"enable_thinking": false}'`,
		Args: nArgs(2, "the agentenv server's URL and the folder to write the rows to", "agentenv skyrl rows http://127.0.0.1:8200 data --tokenizer Qwen/Qwen3-4B --max-prompt-length 3072"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return runSkyrlRows(ctx, env, args[0], args[1], o, cmd.Flags().Changed("token-var"), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := rows.Flags()
	f.StringVar(&o.tokenizer, "tokenizer", "", "the model's tokenizer: a local folder or a Hugging Face model id (ORG/NAME); its chat template renders the prompts")
	f.IntVar(&o.maxPromptLength, "max-prompt-length", 0, "SkyRL's trainer.max_prompt_length: a longer prompt is refused")
	f.StringVar(&o.kwargs, "chat-template-kwargs", "", `SkyRL's generator.chat_template_kwargs, as JSON: '{"enable_thinking": false}'`)
	f.StringVar(&o.toolFormat, "tool-format", "hermes", "the tool-call format the template teaches, which the env reads: "+strings.Join(skyrl.ToolFormats, " or "))
	f.StringVar(&o.tokenVar, "token-var", "AGENTENV_TOKEN", "environment variable holding the server's token; the rows record its name, never the token")
	f.IntVar(&o.attempts, "attempts", 3, "times the env plays a rollout it failed, on a new episode")
	f.IntVar(&o.resetTimeout, "reset-timeout", 600, "seconds after a rollout's start past which no new attempt starts")
	f.StringSliceVar(&o.splits, "splits", nil, "splits to write, comma-separated (default: every split the server has)")
	f.StringVar(&o.dataSource, "data-source", "", "the rows' data_source, which SkyRL groups eval metrics by (default: the bundle's name)")
	markRequired(rows, "tokenizer", "max-prompt-length")
	group.AddCommand(rows)
	return group
}

func runSkyrlRows(ctx context.Context, env Env, url, outDir string, o skyrlRowsOptions, tokenVarGiven bool, stdout, stderr io.Writer) error {
	// The token: read from the variable, sent to the server, never
	// written. A variable named on purpose must hold one.
	token := env.Getenv(o.tokenVar)
	tokenVar := o.tokenVar
	if token == "" {
		if tokenVarGiven {
			return fmt.Errorf("--token-var %s: the variable is empty; export the server's token in it", o.tokenVar)
		}
		tokenVar = ""
	}
	kwargs, err := skyrl.ParseKwargs(o.kwargs)
	if err != nil {
		return fmt.Errorf("--chat-template-kwargs: %w", err)
	}
	counter, cfg, err := loadTokenizer(o.tokenizer, stderr)
	if err != nil {
		return fmt.Errorf("--tokenizer %s: %w", o.tokenizer, err)
	}
	tmpl, err := skyrl.NewChatTemplate(cfg)
	if err != nil {
		return fmt.Errorf("--tokenizer %s: %w", o.tokenizer, err)
	}
	defer tmpl.Close() // its worker processes
	cat, err := skyrl.NewHTTPCatalog(url, token)
	if err != nil {
		return err
	}
	cat.OnPreparing = waitingNote(stderr)
	if o.dataSource == "" {
		if o.dataSource, err = cat.BundleName(ctx); err != nil {
			return explainServerError(url, err, o.tokenVar, token != "")
		}
	}
	opts := skyrl.Options{
		ServerURL: url, TokenVar: tokenVar, Attempts: o.attempts, ResetTimeout: o.resetTimeout,
		ToolFormat: o.toolFormat, DataSource: o.dataSource, MaxPromptLength: o.maxPromptLength,
		Kwargs: kwargs, Splits: o.splits, Progress: progress(stderr),
	}
	res, err := skyrl.Write(ctx, cat, tmpl, counter, outDir, opts)
	if err != nil {
		return explainServerError(url, err, o.tokenVar, token != "")
	}
	var files []string
	for _, w := range res.Files {
		files = append(files, fmt.Sprintf("%s.parquet (%d rows)", w.Split, w.Rows))
	}
	fmt.Fprintf(stdout, "wrote %s to %s\n", strings.Join(files, ", "), outDir)
	l := res.Longest
	fmt.Fprintf(stdout, "the longest prompt is %d tokens with its tools (task %s; %d as SkyRL's prompt filter counts it, without the template kwargs)\n",
		l.Tokens, l.TaskID, l.FilterTokens)
	return nil
}

// explainServerError says what to do about a server that is not there or
// wants a token.
func explainServerError(url string, err error, tokenVar string, sent bool) error {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return noServer(url, err)
	}
	if !errors.Is(err, skyrl.ErrUnauthorized) {
		return err
	}
	if sent {
		return fmt.Errorf("%w: $%s does not hold the token the server was started with; export the right one", err, tokenVar)
	}
	return fmt.Errorf("%w: the server wants a token; export it in $%s (or name the variable with --token-var)", err, tokenVar)
}

// progress reports every tenth of a catalogue of 500 tasks or more.
func progress(w io.Writer) func(done, total int) {
	return func(done, total int) {
		if total < 500 {
			return
		}
		if step := total / 10; done%step == 0 || done == total {
			fmt.Fprintf(w, "read and rendered %d/%d tasks\n", done, total)
		}
	}
}
