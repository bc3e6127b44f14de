package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	"github.com/spf13/cobra"
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

func init() {
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
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (o.task == "") == (o.split == "") {
				return errors.New("give --task ID, or --split NAME with --index N")
			}
			return runPlay(cmd.Context(), args[0], o, os.Getenv(o.tokenVar), cmd.InOrStdin(), cmd.OutOrStdout())
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
	rootCmd.AddCommand(cmd)
}

// wsURL turns a base URL into the session URL, as OpenEnv's clients do:
// http -> ws, https -> wss, /ws appended.
func wsURL(base string) (string, error) {
	if !strings.Contains(base, "://") {
		base = "ws://" + base
	}
	u, err := url.Parse(base)
	if err != nil {
		// Not the URL itself, nor url.Error (which quotes it): it may
		// carry a token as its password.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("server URL is not a valid URL: %w", err)
	}
	switch u.Scheme {
	case "http", "ws":
		u.Scheme = "ws"
	case "https", "wss":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("server URL %q: want http(s):// or ws(s)://", u.Redacted())
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if !strings.HasSuffix(u.Path, "/ws") {
		u.Path += "/ws"
	}
	return u.String(), nil
}

func runPlay(ctx context.Context, base string, o playOptions, token string, in io.Reader, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	target, err := wsURL(base)
	if err != nil {
		return err
	}
	h := http.Header{}
	// A token given as URL userinfo (http://user:<token>@host, as OpenEnv's
	// Python client takes it) goes in the header: the dialer refuses
	// userinfo, and errors below must not echo it.
	if u, err := url.Parse(target); err == nil && u.User != nil {
		if pass, ok := u.User.Password(); ok && token == "" {
			token = pass
		}
		u.User = nil
		target = u.String()
	}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	conn, resp, err := d.DialContext(ctx, target, h)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return fmt.Errorf("connect %s: the server wants a token: put it in $%s (or name the variable with --token-var)", target, o.tokenVar)
		}
		return fmt.Errorf("connect %s: %w", target, err)
	}
	defer conn.Close()
	p := &player{conn: conn, out: out}

	data := map[string]any{"wait_s": o.wait.Seconds()}
	if o.task != "" {
		data["task_id"] = o.task
	} else {
		data["split"], data["index"] = o.split, o.index
	}
	if o.toolFormat != "" {
		data["tool_format"] = o.toolFormat
	}
	if o.maxTurns > 0 {
		data["max_turns"] = o.maxTurns
	}
	obs, err := p.call("reset", data)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "episode %s, task %s\n", obs.Observation.EpisodeID, obs.Observation.TaskID)
	p.print(obs)

	lines := bufio.NewScanner(in)
	lines.Buffer(make([]byte, 64<<10), 16<<20)
	for !obs.Done {
		fmt.Fprintf(out, "\n--- reply (end with a line \".\"; /quit to stop) ---\n")
		reply, quit, eof := readReply(lines)
		if quit || (eof && strings.TrimSpace(reply) == "") {
			p.send(`{"type":"close"}`)
			return errors.New("stopped before the episode was done")
		}
		obs, err = p.call("step", map[string]any{"reply": reply})
		var we *wireErr
		if errors.As(err, &we) && we.Code == "VALIDATION_ERROR" {
			fmt.Fprintf(out, "error: %s\n", we.Message)
			continue
		}
		if err != nil {
			return err
		}
		p.print(obs)
		if eof && !obs.Done {
			p.send(`{"type":"close"}`)
			return errors.New("input ended before the episode was done")
		}
	}
	p.send(`{"type":"close"}`)
	return nil
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

type player struct {
	conn *websocket.Conn
	out  io.Writer
}

type playObs struct {
	Observation struct {
		EpisodeID string `json:"episode_id"`
		TaskID    string `json:"task_id"`
		Messages  []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
		Turn    int                `json:"turn"`
		Metrics map[string]float64 `json:"metrics"`
	} `json:"observation"`
	Reward *float64 `json:"reward"`
	Done   bool     `json:"done"`
}

type wireErr struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *wireErr) Error() string { return e.Code + ": " + e.Message }

func (p *player) send(frame string) error {
	return p.conn.WriteMessage(websocket.TextMessage, []byte(frame))
}

func (p *player) call(typ string, data any) (playObs, error) {
	b, err := json.Marshal(map[string]any{"type": typ, "data": data})
	if err != nil {
		return playObs{}, err
	}
	if err := p.send(string(b)); err != nil {
		return playObs{}, fmt.Errorf("send %s: %w", typ, err)
	}
	_, msg, err := p.conn.ReadMessage()
	if err != nil {
		return playObs{}, fmt.Errorf("waiting for the answer to %s: %w", typ, err)
	}
	var env struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(msg, &env); err != nil {
		return playObs{}, fmt.Errorf("answer to %s is not JSON: %.200q", typ, msg)
	}
	if env.Type == "error" {
		var e wireErr
		json.Unmarshal(env.Data, &e) //nolint:errcheck // shown as is
		return playObs{}, &e
	}
	var obs playObs
	if err := json.Unmarshal(env.Data, &obs); err != nil {
		return playObs{}, fmt.Errorf("answer to %s: %w", typ, err)
	}
	return obs, nil
}

func (p *player) print(obs playObs) {
	for _, m := range obs.Observation.Messages {
		fmt.Fprintf(p.out, "\n[%s]\n%s\n", m.Role, m.Content)
	}
	if len(obs.Observation.Tools) > 0 {
		fmt.Fprintf(p.out, "\n[tools]\n")
		for _, t := range obs.Observation.Tools {
			fmt.Fprintf(p.out, "- %s: %s\n  parameters: %s\n", t.Function.Name, t.Function.Description, t.Function.Parameters)
		}
	}
	if obs.Done {
		reward := "none"
		if obs.Reward != nil {
			reward = fmt.Sprint(*obs.Reward)
		}
		fmt.Fprintf(p.out, "\ndone after %d turns: reward %s\n", obs.Observation.Turn, reward)
		keys := make([]string, 0, len(obs.Observation.Metrics))
		for k := range obs.Observation.Metrics {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(p.out, "  %s = %v\n", k, obs.Observation.Metrics[k])
		}
	}
}
