package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentenv/agentenv/core/dataset/skyrl"
	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/core/transcript"
	"github.com/agentenv/agentenv/core/transcript/sft"
)

// transcriptFilter is the filter flags every transcripts subcommand takes.
type transcriptFilter struct {
	task, split, outcome, cause, episode string
	minReward, maxReward                 float64
}

func (t *transcriptFilter) addFlags(f *pflag.FlagSet) {
	f.StringVar(&t.task, "task", "", `only this task, or tasks matching a glob (* any text, slashes too): --task 'day/eval-*'`)
	f.StringVar(&t.split, "split", "", "only episodes reset by index in this split")
	f.StringVar(&t.outcome, "outcome", "", "only episodes that ended so: done, failed, abandoned")
	f.StringVar(&t.cause, "cause", "", "only episodes that ended for this cause: completed, max_turns, deploy_failed, ... (docs/transcripts.md)")
	f.StringVar(&t.episode, "episode", "", "only this episode id")
	f.Float64Var(&t.minReward, "min-reward", 0, "only episodes scored at least this")
	f.Float64Var(&t.maxReward, "max-reward", 0, "only episodes scored at most this")
}

// filter is the flags as a transcript.Filter; a reward bound counts only
// when its flag was given.
func (t *transcriptFilter) filter(changed func(string) bool) (transcript.Filter, error) {
	f := transcript.Filter{Task: t.task, Split: t.split, Outcome: episode.Outcome(t.outcome), Cause: episode.Cause(t.cause), EpisodeID: t.episode}
	if changed("min-reward") {
		f.MinReward = &t.minReward
	}
	if changed("max-reward") {
		f.MaxReward = &t.maxReward
	}
	if err := f.Check(); err != nil {
		if msg := err.Error(); strings.HasPrefix(msg, "outcome") || strings.HasPrefix(msg, "cause") {
			return f, fmt.Errorf("--%w", err)
		}
		return f, fmt.Errorf("--min-reward, --max-reward: %w", err)
	}
	return f, nil
}

func newTranscriptsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "transcripts",
		Short: "Read back the episodes `serve --record` wrote: list, show as a conversation, export as SFT parquet",
		Long: `transcripts reads the JSON-line files agentenv serve --record DIR writes, one
line per ended episode: pass the directory (every file in it, in day order) or
files. Filter by task, split, outcome, cause and reward; see docs/transcripts.md.`,
		Example: `  agentenv transcripts list runs/ --outcome failed
  agentenv transcripts show runs/ --episode ep-1f2e3d4c5b6a7988
  agentenv transcripts sft runs/ --min-reward 0.9 --out sft.parquet --tokenizer Qwen/Qwen3-8B`,
	}
	cmd.AddCommand(newTranscriptsListCmd(), newTranscriptsShowCmd(), newTranscriptsSFTCmd())
	return cmd
}

func atLeastOnePath(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return nil
	}
	return fmt.Errorf("%s needs the serve --record directory or transcript files\nusage: %s\n  e.g. %s runs/\nrun '%s --help' for the flags",
		cmd.Name(), cmd.UseLine(), cmd.CommandPath(), cmd.CommandPath())
}

// readFiltered calls fn with each record of paths that passes f, and
// notes on stderr the lines it could not read.
func readFiltered(paths []string, f transcript.Filter, stderr io.Writer, fn func(*transcript.Record) error) (transcript.ReadStats, error) {
	st, err := transcript.Read(paths, func(r *transcript.Record) error {
		if !f.Match(r) {
			return nil
		}
		return fn(r)
	})
	noteSkipped(stderr, st)
	return st, err
}

func noteSkipped(stderr io.Writer, st transcript.ReadStats) {
	if st.Skipped > 0 {
		fmt.Fprintf(stderr, "skipped %d %s that %s no transcript (first: %v)\n", st.Skipped, plural(st.Skipped, "line"), isAre(st.Skipped), st.FirstSkip)
	}
	if st.Partial > 0 {
		fmt.Fprintf(stderr, "skipped %d %s (a server killed while writing)\n", st.Partial, plural(st.Partial, "cut-off last line"))
	}
}

func newTranscriptsListCmd() *cobra.Command {
	var tf transcriptFilter
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list DIR|FILE...",
		Short: "List recorded episodes: when, task, outcome, cause, reward, turns",
		Args:  atLeastOnePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := tf.filter(cmd.Flags().Changed)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetEscapeHTML(false)
				_, err := readFiltered(args, f, cmd.ErrOrStderr(), func(r *transcript.Record) error { return enc.Encode(r) })
				return err
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ENDED\tEPISODE\tTASK\tSPLIT\tINDEX\tOUTCOME\tCAUSE\tREWARD\tTURNS")
			n := 0
			st, err := readFiltered(args, f, cmd.ErrOrStderr(), func(r *transcript.Record) error {
				n++
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", r.Ended.UTC().Format(time.DateTime), r.EpisodeID, r.TaskID,
					dash(r.Split), indexText(r.Index), r.Outcome, r.Cause, rewardText(r), len(r.Turns))
				return nil
			})
			if err != nil {
				return err
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%d of %d %s (%d %s)\n", n, st.Records, plural(st.Records, "episode"), st.Files, plural(st.Files, "file"))
			return nil
		},
	}
	tf.addFlags(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the matching records whole, one JSON line each")
	return cmd
}

func newTranscriptsShowCmd() *cobra.Command {
	var tf transcriptFilter
	cmd := &cobra.Command{
		Use:   "show DIR|FILE... --episode ID",
		Short: "Print recorded episodes as conversations: each reply, the calls read and unreadable, what the env answered",
		Long: `show prints each matching episode as a conversation. Name one with --episode,
or narrow with the filters (--outcome failed shows every failed one).`,
		Args: atLeastOnePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := tf.filter(cmd.Flags().Changed)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			n := 0
			_, err = readFiltered(args, f, cmd.ErrOrStderr(), func(r *transcript.Record) error {
				if n > 0 {
					fmt.Fprintln(out, "\n"+strings.Repeat("═", 72))
				}
				n++
				return transcript.WriteText(out, r)
			})
			if err != nil {
				return err
			}
			if n == 0 {
				return errors.New("no recorded episode matches; list them with agentenv transcripts list")
			}
			return nil
		},
	}
	tf.addFlags(cmd.Flags())
	return cmd
}

func newTranscriptsSFTCmd() *cobra.Command {
	var tf transcriptFilter
	var out, tokenizer, kwargsJSON string
	cmd := &cobra.Command{
		Use:   "sft DIR|FILE... --out FILE",
		Short: "Export the recorded episodes scoring at least --min-reward as an SFT parquet file, as agentenv eval --sft-out writes",
		Long: `sft writes the episodes scored at least --min-reward (default 1) that pass the
filters to a parquet file: the messages column (the conversation up to the
model's last reply), task_id, sample and reward, the file agentenv eval
--sft-out writes. With --tokenizer the tools go into the system message as the
model's chat template renders them, as eval does; without it the prompt is as
the server sent it (no tool list).`,
		Args: atLeastOnePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			changed := cmd.Flags().Changed
			if !changed("min-reward") {
				tf.minReward = 1
			}
			// The least reward is sft's own bound (matched counts what the
			// other filters keep); the filter keeps only the most.
			f, err := tf.filter(func(name string) bool { return name != "min-reward" && changed(name) })
			if err != nil {
				return err
			}
			if changed("max-reward") && tf.minReward > tf.maxReward {
				return fmt.Errorf("--min-reward, --max-reward: reward range %g to %g is empty: the least reward is over the most", tf.minReward, tf.maxReward)
			}
			o := sft.Options{Filter: f, MinReward: tf.minReward}
			stderr := cmd.ErrOrStderr()
			if tokenizer != "" {
				if o.Kwargs, err = skyrl.ParseKwargs(kwargsJSON); err != nil {
					return fmt.Errorf("--chat-template-kwargs: %w", err)
				}
				_, cfg, err := loadChatTemplate(tokenizer, stderr)
				if err != nil {
					return fmt.Errorf("--tokenizer %s: %w", tokenizer, err)
				}
				if o.Template, err = skyrl.NewChatTemplate(cfg); err != nil {
					return fmt.Errorf("--tokenizer %s: %w", tokenizer, err)
				}
				defer o.Template.Close()
			} else {
				if kwargsJSON != "" {
					return errors.New("--chat-template-kwargs goes with --tokenizer")
				}
				fmt.Fprintln(stderr, "note: no --tokenizer: the prompts carry no tool list; pass the model's tokenizer to put the tools in the system message as eval does")
			}
			res, err := sft.Write(args, out, o)
			if res != nil {
				noteSkipped(stderr, res.Read)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d episodes with reward ≥ %g (of %d matching, %d read)\n", res.File, res.Rows, res.MinReward, res.Matched, res.Read.Records)
			return nil
		},
	}
	tf.addFlags(cmd.Flags())
	f := cmd.Flags()
	f.Lookup("min-reward").Usage = "the least reward an episode needs to go in (default 1)"
	f.StringVar(&out, "out", "", "the parquet file to write")
	f.StringVar(&tokenizer, "tokenizer", "", "the model's tokenizer (a local folder or a Hugging Face model id): its chat template puts the tools in the system message")
	f.StringVar(&kwargsJSON, "chat-template-kwargs", "", `chat template kwargs as JSON, with --tokenizer: '{"enable_thinking": false}'`)
	markRequired(cmd, "out")
	return cmd
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func indexText(i *int) string {
	if i == nil {
		return "-"
	}
	return strconv.Itoa(*i)
}

func rewardText(r *transcript.Record) string {
	if v, ok := r.Score(); ok {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	return "-"
}
