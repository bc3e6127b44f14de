package skyrl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/agentenv/agentenv/core/firstparty"
	"github.com/agentenv/agentenv/sdk"
)

// Counter counts the tokens of a rendered prompt as the model's tokenizer
// does (apply_chat_template(..., tokenize=True)): special tokens written
// in the text, such as <|im_start|>, count as one each. It must be safe
// for concurrent use. It fails on a tokenizer that cannot count the text
// (a Split pattern that backtracks without end).
type Counter interface {
	Count(text string) (int, error)
}

// ToolFormats are the tool-call formats the env reads.
var ToolFormats = []string{"hermes", "qwen3_coder"}

// Options say how to write the rows.
type Options struct {
	// ServerURL is the server's URL as the env will open it.
	ServerURL string
	// TokenVar names the environment variable holding the server's
	// token; "" when the server has none.
	TokenVar     string
	Attempts     int
	ResetTimeout int // seconds
	ToolFormat   string
	DataSource   string
	// MaxPromptLength is SkyRL's trainer.max_prompt_length: a longer
	// prompt is refused.
	MaxPromptLength int
	// Kwargs is SkyRL's generator.chat_template_kwargs.
	Kwargs Kwargs
	// Splits to write; nil writes every split the server has.
	Splits []string
	// Progress, if set, is called as tasks are read and rendered.
	Progress func(done, total int)
}

// Written is one parquet file written.
type Written struct {
	Split string
	File  string // its path
	Rows  int
}

// PromptLength is a task's prompt length in tokens: as SkyRL's generator
// renders it (with the template kwargs) and as its prompt filter counts
// it (without them).
type PromptLength struct {
	TaskID               string
	Tokens, FilterTokens int
}

// Result is what Write wrote.
type Result struct {
	Files    []Written
	Tasks    int // distinct tasks
	Toolsets int
	Longest  PromptLength
}

// TooLongError is rows over the prompt length, refused before anything
// is written.
type TooLongError struct {
	Max   int
	Tasks []PromptLength // longest first
}

func (e *TooLongError) Error() string {
	var b strings.Builder
	n := fmt.Sprintf("%d prompts are", len(e.Tasks))
	if len(e.Tasks) == 1 {
		n = "1 prompt is"
	}
	fmt.Fprintf(&b, "%s over --max-prompt-length %d (SkyRL's filter would drop them without saying); nothing was written:", n, e.Max)
	for i, t := range e.Tasks {
		if i == 5 {
			fmt.Fprintf(&b, "\n  and %d more", len(e.Tasks)-i)
			break
		}
		fmt.Fprintf(&b, "\n  task %s: %d tokens as the generator renders it (with the template kwargs), %d as the prompt filter counts it (without them)", t.TaskID, t.Tokens, t.FilterTokens)
	}
	b.WriteString("\nraise --max-prompt-length (and SkyRL's trainer.max_prompt_length) or shorten the prompts")
	return b.String()
}

func (o *Options) check() error {
	if _, err := ServerURL(o.ServerURL); err != nil {
		return err
	}
	switch {
	case o.MaxPromptLength < 1:
		return fmt.Errorf("--max-prompt-length %d: want SkyRL's trainer.max_prompt_length, a positive number of tokens", o.MaxPromptLength)
	case o.Attempts < 1:
		return fmt.Errorf("--attempts %d: want at least 1", o.Attempts)
	case o.ResetTimeout < 1:
		return fmt.Errorf("--reset-timeout %d: want at least 1 second", o.ResetTimeout)
	case o.DataSource == "":
		return errors.New("--data-source: want a name")
	}
	for _, f := range ToolFormats {
		if o.ToolFormat == f {
			return nil
		}
	}
	also := ""
	if a := toolFormatAliases(); len(a) > 0 {
		also = " (or another name of one: " + strings.Join(a, ", ") + ")"
	}
	return fmt.Errorf("--tool-format %q: want one of %s%s", o.ToolFormat, strings.Join(ToolFormats, ", "), also)
}

// toolFormatAliases are the other names of ToolFormats, as the plugin
// host resolves them.
func toolFormatAliases() []string {
	var out []string
	for _, f := range firstparty.All() {
		if f.Kind == sdk.KindToolFormat && slices.Contains(ToolFormats, f.Name) {
			out = append(out, f.Aliases...)
		}
	}
	return out
}

// task is one distinct task of the splits written.
type task struct {
	id, toolset string
	prompt      Prompt
	length      PromptLength
}

// Write reads the catalogue's tasks and tools, renders each task's prompt
// with its tools in the system message, checks it, and writes one
// <split>.parquet per split into outDir. Every prompt is rendered and
// counted before any file is written; a refusal writes nothing.
func Write(ctx context.Context, cat Catalog, tmpl *ChatTemplate, counter Counter, outDir string, o Options) (*Result, error) {
	// The plugin host's resolution of names: qwen3coder is qwen3_coder.
	o.ToolFormat = firstparty.CanonicalName(sdk.KindToolFormat, o.ToolFormat)
	if err := o.check(); err != nil {
		return nil, err
	}
	serverURL, _ := ServerURL(o.ServerURL)
	splits, err := pickSplits(ctx, cat, o.Splits)
	if err != nil {
		return nil, err
	}
	entries := map[string][]TaskEntry{}
	var tasks []*task
	byID := map[string]*task{}
	toolsetTasks := map[string][]string{}
	var toolsets []string
	for _, s := range splits {
		list, err := ListSplit(ctx, cat, s)
		if err != nil {
			return nil, err
		}
		entries[s.Name] = list
		for _, e := range list {
			if t := byID[e.TaskID]; t != nil {
				if t.toolset != e.Toolset {
					return nil, fmt.Errorf("task %s is listed with toolset %s and %s", e.TaskID, t.toolset, e.Toolset)
				}
				continue
			}
			t := &task{id: e.TaskID, toolset: e.Toolset}
			byID[e.TaskID] = t
			tasks = append(tasks, t)
			if len(toolsetTasks[e.Toolset]) == 0 {
				toolsets = append(toolsets, e.Toolset)
			}
			toolsetTasks[e.Toolset] = append(toolsetTasks[e.Toolset], e.TaskID)
		}
	}

	// Each toolset's tools once: listing them deploys one env.
	tools := map[string]Tools{}
	for _, ts := range toolsets {
		raw, err := cat.Tools(ctx, ts)
		if err != nil {
			return nil, toolsetError(ts, toolsetTasks[ts], err)
		}
		if tools[ts], err = ParseTools(raw, "toolset "+ts+"'s tools"); err != nil {
			return nil, err
		}
	}

	if err := renderTasks(ctx, cat, tmpl, counter, tasks, tools, o); err != nil {
		return nil, err
	}
	res := &Result{Tasks: len(tasks), Toolsets: len(toolsets)}
	var long []PromptLength
	for _, t := range tasks {
		if max(t.length.Tokens, t.length.FilterTokens) > max(res.Longest.Tokens, res.Longest.FilterTokens) {
			res.Longest = t.length
		}
		if t.length.Tokens > o.MaxPromptLength || t.length.FilterTokens > o.MaxPromptLength {
			long = append(long, t.length)
		}
	}
	if len(long) > 0 {
		sort.SliceStable(long, func(i, j int) bool { return long[i].Tokens > long[j].Tokens })
		return nil, &TooLongError{Max: o.MaxPromptLength, Tasks: long}
	}

	server := Server{URL: serverURL, Attempts: int64(o.Attempts), ResetTimeout: int64(o.ResetTimeout), ToolFormat: o.ToolFormat}
	if o.TokenVar != "" {
		server.TokenVar = &o.TokenVar
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("output folder: %w", err)
	}
	var temps []string
	defer func() {
		for _, tmp := range temps {
			os.Remove(tmp) // those not renamed into place
		}
	}()
	for _, s := range splits {
		rows := make([]Row, len(entries[s.Name]))
		for i, e := range entries[s.Name] {
			t := byID[e.TaskID]
			rows[i] = Row{
				Prompt:     t.prompt.Messages,
				EnvClass:   EnvClass,
				Episode:    Episode{Split: s.Name, Index: int64(e.Index), TaskID: e.TaskID, Tools: tools[t.toolset].Names()},
				Server:     server,
				DataSource: o.DataSource,
			}
			if rows[i].Episode.Tools == nil {
				rows[i].Episode.Tools = []string{}
			}
		}
		tmp, err := writeParquet(outDir, s.Name+".parquet", rows, rowsKind)
		if err != nil {
			return nil, err
		}
		temps = append(temps, tmp)
		res.Files = append(res.Files, Written{Split: s.Name, File: filepath.Join(outDir, s.Name+".parquet"), Rows: len(rows)})
	}
	for i, w := range res.Files {
		if err := os.Rename(temps[i], w.File); err != nil {
			return nil, fmt.Errorf("write %s: %w", w.File, err)
		}
		temps[i] = ""
	}
	return res, nil
}

// pickSplits returns the splits asked for, in the server's order.
func pickSplits(ctx context.Context, cat Catalog, want []string) ([]Split, error) {
	all, err := cat.Splits(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the splits: %w", err)
	}
	var names []string
	seen := map[string]bool{}
	for _, s := range all {
		names = append(names, s.Name)
		// The split names a file: refuse what would leave outDir.
		if s.Name == "" || s.Name == "." || s.Name == ".." || strings.ContainsAny(s.Name, `/\`) || strings.HasPrefix(s.Name, ".") {
			return nil, fmt.Errorf("the server has a split named %q, which cannot name a file", s.Name)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("the server lists the split %s twice", s.Name)
		}
		seen[s.Name] = true
	}
	if len(want) == 0 {
		return all, nil
	}
	var out []Split
	for _, w := range want {
		found := false
		for _, s := range all {
			if s.Name == w {
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("--splits: the server has no split %q; it has %s", w, strings.Join(names, ", "))
		}
	}
	for _, s := range all {
		for _, w := range want {
			if s.Name == w {
				out = append(out, s)
				break
			}
		}
	}
	return out, nil
}

// MaxSplitTasks bounds the size of a split a server may report: far over
// any real split, and under what the rows of one would take to hold.
const MaxSplitTasks = 10_000_000

// ListSplit reads a split's tasks a page at a time, checking each
// task's index. What the server says is checked before it is used: a size
// out of range, a page longer than asked, a task without an id.
func ListSplit(ctx context.Context, cat Catalog, s Split) ([]TaskEntry, error) {
	const page = 1000
	if s.Size < 0 || s.Size > MaxSplitTasks {
		return nil, fmt.Errorf("list split %s: the server says it has %d tasks, which is not a split size (0 to %d): is the URL an agentenv server's?", s.Name, s.Size, MaxSplitTasks)
	}
	out := make([]TaskEntry, 0, min(s.Size, page)) // grows as the pages come, not by what the server claims
	for start := 0; start < s.Size; start += page {
		stop := min(s.Size, start+page)
		got, err := cat.Tasks(ctx, s.Name, start, stop)
		if err != nil {
			return nil, fmt.Errorf("list split %s: %w", s.Name, err)
		}
		if len(got) > stop-start {
			return nil, fmt.Errorf("list split %s: asked for tasks %d to %d, the server sent %d", s.Name, start, stop, len(got))
		}
		for i, e := range got {
			if e.Index != start+i {
				return nil, fmt.Errorf("list split %s: task %s has index %d, want %d", s.Name, e.TaskID, e.Index, start+i)
			}
			if e.TaskID == "" {
				return nil, fmt.Errorf("list split %s: the task at index %d has no task_id", s.Name, e.Index)
			}
		}
		out = append(out, got...)
		if len(got) == 0 {
			break
		}
	}
	if len(out) != s.Size {
		return nil, fmt.Errorf("list split %s: %d tasks, the split says %d", s.Name, len(out), s.Size)
	}
	return out, nil
}

func toolsetError(ts string, taskIDs []string, err error) error {
	which := "task " + taskIDs[0]
	if len(taskIDs) > 1 {
		which = fmt.Sprintf("tasks %s and %d more", taskIDs[0], len(taskIDs)-1)
	}
	if errors.Is(err, ErrDeploy) {
		return fmt.Errorf("toolset %s (%s): listing its tools deploys one of its envs, and that failed: %w\nplay the task by hand to see why (agentenv play URL --task %s) and read the server's log; fix the env, then write the rows again", ts, which, err, taskIDs[0])
	}
	return fmt.Errorf("toolset %s (%s): list its tools: %w", ts, which, err)
}

// renderTasks reads each task's prompt, renders it with its tools and
// counts it, on every core.
func renderTasks(ctx context.Context, cat Catalog, tmpl *ChatTemplate, counter Counter, tasks []*task, tools map[string]Tools, o Options) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(4, runtime.GOMAXPROCS(0)))
	var mu sync.Mutex
	done := 0
	for _, t := range tasks {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			info, err := cat.Task(ctx, t.id)
			if err != nil {
				return fmt.Errorf("read task %s: %w", t.id, err)
			}
			if t.prompt, err = tmpl.TaskPrompt(t.id, t.toolset, info.Prompt, tools[t.toolset], o.Kwargs); err != nil {
				return err
			}
			t.length = PromptLength{TaskID: t.id}
			if t.length.Tokens, err = counter.Count(t.prompt.Text); err == nil {
				t.length.FilterTokens, err = counter.Count(t.prompt.FilterText)
			}
			if err != nil {
				return fmt.Errorf("task %s: count the prompt's tokens: %w", t.id, err)
			}
			t.prompt.Text, t.prompt.FilterText = "", "" // counted; free them
			if o.Progress != nil {
				mu.Lock()
				done++
				o.Progress(done, len(tasks))
				mu.Unlock()
			}
			return nil
		})
	}
	return g.Wait()
}
