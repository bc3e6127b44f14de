package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentenv/agentenv/client"
)

// playOptions are the flags of `agentenv play`.
type playOptions struct {
	task       string
	split      string
	index      int
	toolFormat string
	maxTurns   int
	tokenVar   string
	wait       time.Duration
}

func newPlayCmd(env Env) *cobra.Command {
	var o playOptions
	cmd := &cobra.Command{
		Use:   "play URL (--task ID | --split NAME --index N)",
		Short: "Play one episode of a served bundle by hand",
		Long: `play opens a WebSocket session to an agentenv server, resets one task, prints
its prompt and tools, and reads the model's replies from stdin: type a reply
and end it with a line holding only "." (or end the input). Each reply is
sent as a step and the server's observation is printed, until the episode
is done and its reward shown. A line "/quit" closes the session.

URL is the server's base URL (http://127.0.0.1:8200) or its /ws URL.`,
		Example: `  agentenv play http://127.0.0.1:8200 --task day/eval-001
  printf '<tool_call>\n{"name": "submit_schedule", "arguments": {"schedule": [0]}}\n</tool_call>\n.\ndone\n' |
    agentenv play http://127.0.0.1:8200 --split eval --index 0`,
		Args: oneArg("the agentenv server's URL", "agentenv play http://127.0.0.1:8200 --task day/eval-001"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (o.task == "") == (o.split == "") {
				return errors.New("give --task ID, or --split NAME with --index N")
			}
			// Ctrl-C closes the session, so the server tears the episode
			// down at once.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runPlay(ctx, args[0], o, env.Getenv(o.tokenVar), cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.task, "task", "", "task id to play")
	f.StringVar(&o.split, "split", "", "split to take the task from (with --index)")
	f.IntVar(&o.index, "index", 0, "index of the task in --split")
	f.StringVar(&o.toolFormat, "tool-format", "", "tool-call format of the replies (default: the server's)")
	f.IntVar(&o.maxTurns, "max-turns", 0, "end the episode after this many replies (0: the task's own limit)")
	f.StringVar(&o.tokenVar, "token-var", "AGENTENV_TOKEN", "environment variable holding the server's token (unset: no token)")
	f.DurationVar(&o.wait, "wait", 10*time.Minute, "how long the reset may wait for a free slot on a busy server")
	return cmd
}

// runPlay plays one episode against the server at base, with the token
// read from $o.tokenVar (token), replies from in and the transcript to out.
func runPlay(ctx context.Context, base string, o playOptions, token string, in io.Reader, out io.Writer) error {
	note := waitingNote(out)
	c, err := client.New(base, client.Options{Token: token, OnRetry: func(err error, _ time.Duration) {
		var e *client.Error
		if errors.As(err, &e) && e.Code == client.CodePreparing {
			note(e.Message)
		}
	}})
	if err != nil {
		return err
	}
	// No deadline: a server that is down or busy is reported at once, not
	// waited for; only the reset queues, for --wait. A server that still
	// builds its envs is waited for, as long as --wait.
	if err := c.Health(ctx); errors.Is(err, client.CodePreparing) {
		var e *client.Error
		errors.As(err, &e)
		note(e.Message)
		wctx, cancel := context.WithTimeout(ctx, max(o.wait, time.Second))
		err = c.Health(wctx)
		cancel()
		if err != nil {
			return fmt.Errorf("the server at %s was still preparing after --wait %s: %w", c.BaseURL(), o.wait, err)
		}
	}
	sess, err := c.Connect(ctx)
	if err != nil {
		return explainConnect(c, o, token, err)
	}
	defer sess.Close()
	wait := o.wait
	if wait <= 0 {
		wait = -1 // do not queue
	}
	res, err := sess.Reset(ctx, client.ResetRequest{TaskID: o.task, Split: o.split, Index: o.index,
		ToolFormat: o.toolFormat, MaxTurns: o.maxTurns, Wait: wait})
	if err != nil {
		return explainLost(err, "before the episode started")
	}
	episode := res.Observation.EpisodeID
	fmt.Fprintf(out, "episode %s, task %s\n", episode, res.Observation.TaskID)
	printResult(out, res)

	// Replies are read in the background, so that a server that goes away
	// while the user types is reported at once.
	stop := make(chan struct{})
	defer close(stop)
	replies := readReplies(in, stop)
	for !res.Done {
		fmt.Fprintf(out, "\n--- reply (end with a line \".\"; /quit to stop) ---\n")
		var r playReply
		select {
		case r = <-replies:
		case <-sess.Done():
			return explainLost(sess.Err(), "mid-episode (episode "+episode+")")
		case <-ctx.Done():
			return fmt.Errorf("interrupted before the episode was done: %w", ctx.Err())
		}
		if r.quit || (r.eof && strings.TrimSpace(r.text) == "") {
			return errors.New("stopped before the episode was done")
		}
		res, err = sess.Step(ctx, r.text)
		if errors.Is(err, client.CodeValidation) {
			var e *client.Error
			errors.As(err, &e)
			fmt.Fprintf(out, "error: %s\n", e.Message)
			continue
		}
		if err != nil {
			return explainLost(err, "mid-episode (episode "+episode+")")
		}
		printResult(out, res)
		if r.eof && !res.Done {
			return errors.New("input ended before the episode was done")
		}
	}
	return nil
}

// explainConnect says what a failed connection means and what to do.
func explainConnect(c *client.Client, o playOptions, token string, err error) error {
	switch {
	case errors.Is(err, client.CodeUnauthorized) && token != "":
		return fmt.Errorf("the server at %s refused the token in $%s: check that it is the token the server was started with", c.BaseURL(), o.tokenVar)
	case errors.Is(err, client.CodeUnauthorized) && c.HasToken():
		return fmt.Errorf("the server at %s refused the token in the URL", c.BaseURL())
	case errors.Is(err, client.CodeUnauthorized):
		return fmt.Errorf("the server at %s wants a token: put it in $%s (or name the variable with --token-var)", c.BaseURL(), o.tokenVar)
	case errors.Is(err, syscall.ECONNREFUSED):
		return noServer(c.BaseURL(), err)
	case errors.Is(err, client.CodeShuttingDown):
		return fmt.Errorf("%w\nthe server at %s is shutting down: play again once it is back", err, c.BaseURL())
	}
	return err
}

// noServer words a refused connection to the agentenv server at baseURL
// (play, eval and skyrl rows alike): what it means and what to do.
func noServer(baseURL string, err error) error {
	host := baseURL
	if u, perr := url.Parse(baseURL); perr == nil && u.Host != "" {
		host = u.Host
	}
	return fmt.Errorf("%w\nno server is listening at %s: start one with `agentenv serve BUNDLE --addr %s`, or check the URL", err, host, host)
}

// explainLost says so when the server went away (when: "mid-episode").
func explainLost(err error, when string) error {
	switch {
	case errors.Is(err, client.CodeShuttingDown):
		return fmt.Errorf("the server shut down %s; the episode was closed: %w", when, err)
	case errors.Is(err, client.ErrDisconnected):
		return fmt.Errorf("the connection to the server was lost %s: %w", when, err)
	}
	return err
}

// playReply is one reply read from the input.
type playReply struct {
	text      string
	quit, eof bool
}

// readReplies reads replies from in until /quit or the end of the input,
// or until stop is closed.
func readReplies(in io.Reader, stop <-chan struct{}) <-chan playReply {
	ch := make(chan playReply)
	go func() {
		lines := bufio.NewScanner(in)
		lines.Buffer(make([]byte, 64<<10), 16<<20)
		for {
			text, quit, eof := readReply(lines)
			select {
			case ch <- playReply{text, quit, eof}:
			case <-stop:
				return
			}
			if quit || eof {
				return
			}
		}
	}()
	return ch
}

// readReply reads lines up to one holding only "." or the end of input.
func readReply(lines *bufio.Scanner) (reply string, quit, eof bool) {
	var b strings.Builder
	for {
		if !lines.Scan() {
			return strings.TrimSuffix(b.String(), "\n"), false, true
		}
		line := lines.Text()
		if b.Len() == 0 && strings.TrimSpace(line) == "/quit" {
			return "", true, false
		}
		if line == "." {
			return strings.TrimSuffix(b.String(), "\n"), false, false
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
}

func printResult(out io.Writer, res client.Result) {
	obs := res.Observation
	for _, m := range obs.Messages {
		fmt.Fprintf(out, "\n[%s]\n%s\n", m.Role, m.Content)
	}
	if len(obs.Tools) > 0 {
		fmt.Fprintf(out, "\n[tools]\n")
		for _, t := range obs.Tools {
			fmt.Fprintf(out, "- %s: %s\n  parameters: %s\n", t.Function.Name, t.Function.Description, t.Function.Parameters)
		}
	}
	if res.Done {
		reward := "none"
		if res.Reward != nil {
			reward = fmt.Sprint(*res.Reward)
		}
		fmt.Fprintf(out, "\ndone after %d turns: reward %s\n", obs.Turn, reward)
		keys := make([]string, 0, len(obs.Metrics))
		for k := range obs.Metrics {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(out, "  %s = %v\n", k, obs.Metrics[k])
		}
	}
}
