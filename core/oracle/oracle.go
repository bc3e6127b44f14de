// Package oracle checks a Harbor dataset's tasks before training on them:
// each task is played twice through the engine, as a model would play it,
// once by its reference solution (solution/solve.sh, written into the
// container with the editor tool and run with the shell tool) and once by
// an agent that does nothing. A sound task scores 1 with the oracle and
// less without it (docs/harbor.md).
package oracle

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/episode"
)

// SolutionPath is where the oracle writes a task's solution/ folder.
const SolutionPath = "/solution"

// solveTimeout is the shell tool's timeout for solve.sh (its maximum).
const solveTimeout = 600

// Row is one task's check.
type Row struct {
	Task  string `json:"task"`
	Built bool   `json:"built"` // its env deployed (image built, terminal answered)
	// Oracle and Null are the rewards; nil when that play failed (Error says why).
	Oracle *float64 `json:"oracle_reward"`
	Null   *float64 `json:"null_reward"`
	// Seconds of the oracle's play: deploy (with ready), the solution's
	// tool calls, the verifier.
	Deploy float64 `json:"deploy_s"`
	Solve  float64 `json:"solve_s"`
	Verify float64 `json:"verify_s"`
	// OracleOutput is the tail of solve.sh's shell result, when it failed.
	OracleOutput string `json:"oracle_output,omitempty"`
	Error        string `json:"error,omitempty"`
}

// OK reports whether the task is sound: the oracle scores 1, doing
// nothing scores less.
func (r Row) OK() bool {
	return r.Error == "" && r.Oracle != nil && *r.Oracle == 1 && r.Null != nil && *r.Null < 1
}

// Options tune Check.
type Options struct {
	// Parallel is how many tasks are checked at once (0 = 2).
	Parallel int
	// ToolFormat the oracle writes its calls in (must be served; "" = hermes).
	ToolFormat string
	// Done hears of each row as it is finished (may be nil; called from
	// one goroutine at a time).
	Done func(Row)
}

// Check plays every task of tasks with its oracle and with no action.
// Rows come back in the order of tasks.
func Check(ctx context.Context, eng *episode.Engine, tasks []*bundle.Task, o Options) []Row {
	par := o.Parallel
	if par <= 0 {
		par = 2
	}
	if o.ToolFormat == "" {
		o.ToolFormat = "hermes"
	}
	rows := make([]Row, len(tasks))
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, t := range tasks {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			rows[i] = checkTask(ctx, eng, t, o.ToolFormat)
			if o.Done != nil {
				mu.Lock()
				o.Done(rows[i])
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return rows
}

func checkTask(ctx context.Context, eng *episode.Engine, t *bundle.Task, format string) Row {
	row := Row{Task: t.ID}
	if t.Harbor == nil {
		row.Error = "not a Harbor task: the oracle check plays Harbor tasks (solution/solve.sh)"
		return row
	}
	if t.Harbor.SolutionDir == "" {
		// Still play it without action: that shows it builds and its
		// verifier scores.
		res, r, _, err := play(ctx, eng, t.ID, format, "")
		row.Built = res.Seconds()[string(episode.PhaseReady)] > 0 || r != nil
		row.Null = r
		row.Error = "no solution/solve.sh: nothing to check the task with"
		if err != nil {
			row.Error += "; with no action: " + err.Error()
		}
		return row
	}
	calls, err := SolutionReply(t.Harbor.SolutionDir, t.Harbor.SolutionEnv)
	if err != nil {
		row.Error = fmt.Sprintf("reading the solution: %v", err)
		return row
	}
	res, r, out, err := play(ctx, eng, t.ID, format, calls)
	secs := res.Seconds()
	row.Deploy = secs[string(episode.PhaseDeploy)] + secs[string(episode.PhaseReady)]
	row.Solve = secs[string(episode.PhaseTool)]
	row.Verify = secs[string(episode.PhaseVerify)]
	row.Built = secs[string(episode.PhaseReady)] > 0 || r != nil
	if err != nil {
		row.Error = "oracle: " + err.Error()
		row.OracleOutput = out
		return row
	}
	row.Oracle = r
	if *r != 1 {
		row.OracleOutput = out
	}
	_, r, _, err = play(ctx, eng, t.ID, format, "")
	if err != nil {
		row.Error = "no action: " + err.Error()
		return row
	}
	row.Null = r
	return row
}

// play plays one episode: reply (if any) as the first turn, then a reply
// without a tool call, which ends the turn and runs the tests. It returns
// the reward and the tool results of the first reply.
func play(ctx context.Context, eng *episode.Engine, task, format, reply string) (episode.Result, *float64, string, error) {
	ep, err := eng.Play(episode.Request{TaskID: task, ToolFormat: format})
	if err != nil {
		return episode.Result{}, nil, "", err
	}
	defer ep.Close(context.WithoutCancel(ctx))
	obs, err := ep.Start(ctx)
	if err != nil {
		return ep.Result(), nil, "", err
	}
	var out string
	if reply != "" {
		if obs, err = ep.Step(ctx, reply); err != nil {
			return ep.Result(), nil, "", err
		}
		var b strings.Builder
		for _, m := range obs.Messages {
			b.WriteString(m.Content)
			b.WriteString("\n")
		}
		out = tail(b.String(), 2000)
	}
	if !obs.Done {
		if obs, err = ep.Step(ctx, "Done."); err != nil {
			return ep.Result(), nil, out, err
		}
	}
	if !obs.Done || obs.Reward == nil {
		return ep.Result(), nil, out, fmt.Errorf("the episode did not end after a reply without a tool call")
	}
	return ep.Result(), obs.Reward, out, nil
}

// SolutionReply is the oracle's reply in Hermes' format: an editor create
// per text file of solution/ (a shell call with base64 for any other),
// then solve.sh run with the shell tool and [solution] env.
func SolutionReply(dir string, env map[string]string) (string, error) {
	var b strings.Builder
	call := func(name string, args map[string]any) error {
		data, err := json.Marshal(map[string]any{"name": name, "arguments": args})
		if err != nil {
			return err
		}
		b.WriteString("<tool_call>\n")
		b.Write(data)
		b.WriteString("\n</tool_call>\n")
		return nil
	}
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(dir, f)
		dst := SolutionPath + "/" + filepath.ToSlash(rel)
		if utf8.Valid(data) {
			err = call(bundle.HarborEditorTool, map[string]any{"command": "create", "path": dst, "file_text": string(data)})
		} else {
			cmd := fmt.Sprintf("mkdir -p %s && echo %s | base64 -d > %s", shellQuote(filepath.Dir(dst)),
				base64.StdEncoding.EncodeToString(data), shellQuote(dst))
			err = call(bundle.HarborShellTool, map[string]any{"command": cmd})
		}
		if err != nil {
			return "", err
		}
	}
	var envs []string
	for k, v := range env {
		envs = append(envs, k+"="+shellQuote(v))
	}
	sort.Strings(envs)
	cmd := "bash " + SolutionPath + "/solve.sh"
	if len(envs) > 0 {
		cmd = "env " + strings.Join(envs, " ") + " " + cmd
	}
	if err := call(bundle.HarborShellTool, map[string]any{"command": cmd, "timeout_sec": solveTimeout}); err != nil {
		return "", err
	}
	return b.String(), nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
