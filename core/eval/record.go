package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentenv/agentenv/core/tempfile"
)

// Record is one rollout, one line of the results file.
type Record struct {
	TaskID string `json:"task_id"`
	Split  string `json:"split"`
	Index  int    `json:"index"`
	// Sample numbers the rollouts of one task, from 0 (--samples).
	Sample     int    `json:"sample"`
	Model      string `json:"model"`
	ToolFormat string `json:"tool_format"`
	EpisodeID  string `json:"episode_id,omitempty"`
	// Reward is the episode's; null when the rollout failed.
	Reward *float64 `json:"reward"`
	// Scores are the verifiers' scores by step id (the score/<id> metrics).
	Scores map[string]float64 `json:"scores,omitempty"`
	// Metrics are the episode's other metrics: tool_calls, unparsed_calls,
	// invalid_calls, tool_errors, turns, failed.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Unparsed lists the tool calls the server could not read, with why.
	Unparsed []Unparsed `json:"unparsed,omitempty"`
	// Failure says why a rollout has no reward.
	Failure *Failure `json:"failure,omitempty"`
	// Attempts is the episodes played for this rollout: 1 unless the env
	// failed one; EnvErrors says why each earlier one failed.
	Attempts  int      `json:"attempts"`
	EnvErrors []string `json:"env_errors,omitempty"`
	// Messages is the conversation of the last attempt: the prompt as the
	// model saw it (its tools in the system message), each reply as the
	// model wrote it, each observation as the server sent it.
	Messages []Message `json:"messages"`
	Turns    []Turn    `json:"turns"`
	Timings  Timings   `json:"timings"`
	Usage    Usage     `json:"usage"`
	Started  time.Time `json:"started"`
}

// Failure is why a rollout has no reward: its cause (model, env,
// unscored, refused) and the error.
type Failure struct {
	Cause string `json:"cause"`
	Error string `json:"error"`
}

// The causes of a failed rollout.
const (
	CauseModel    = "model"    // the model endpoint answered no reply: an error, a timeout, garbage
	CauseEnv      = "env"      // the env failed every attempt: deploy, a tool call, the server went away
	CauseUnscored = "unscored" // the episode ended without a score
	CauseRefused  = "refused"  // the server refused a reply (too large, invalid)
)

// Unparsed is a tool call the server could not read, in reply Turn (from 1).
type Unparsed struct {
	Turn   int    `json:"turn"`
	Reason string `json:"reason"`
}

// Turn is one model reply and the server's answer to it.
type Turn struct {
	ModelS           float64 `json:"model_s"`
	EnvS             float64 `json:"env_s"`
	FinishReason     string  `json:"finish_reason,omitempty"`
	PromptTokens     int     `json:"prompt_tokens,omitempty"`
	CompletionTokens int     `json:"completion_tokens,omitempty"`
}

// Timings split a rollout's time, every attempt included: in the model
// (its requests), in the env (resets, deploys and steps on the server),
// and the whole.
type Timings struct {
	WallS  float64 `json:"wall_s"`
	ModelS float64 `json:"model_s"`
	EnvS   float64 `json:"env_s"`
	// ResetS is the part of EnvS spent in resets: waiting for a slot,
	// deploying the env, the task's setup.
	ResetS float64 `json:"reset_s"`
}

// Usage is the endpoint's token counts summed over the rollout's replies.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// key names one rollout.
type key struct {
	task   string
	sample int
}

func (r *Record) key() key { return key{r.TaskID, r.Sample} }

// results is the results file, appended one whole line at a time.
type results struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

// resumeState is what a results file held when the eval started.
type resumeState struct {
	records []Record // without messages and turns
	// dropped is a half-written last line cut off, retried the failed
	// rollouts removed.
	dropped, retried int
}

// openResults opens the results file for appending. Without resume it
// must not hold rollouts already. With resume its rollouts are read back
// (check refuses those of another eval), a half-written last line is cut
// off, and with retryFailed the failed ones are removed so they play
// again.
func openResults(path string, resume, retryFailed bool, check func(*Record) error) (*results, *resumeState, error) {
	st := &resumeState{}
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, nil, fmt.Errorf("--out %s: %w", path, err)
	case len(raw) > 0 && !resume:
		return nil, nil, fmt.Errorf("--out %s already holds %d lines: pass --resume to go on with that eval, or name another file", path, bytes.Count(raw, []byte("\n")))
	case len(raw) > 0:
		if err := st.read(path, raw, retryFailed, check); err != nil {
			return nil, nil, err
		}
	}
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("--out %s: %w", path, err)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("--out %s: %w", path, err)
	}
	return &results{path: path, f: f}, st, nil
}

// read reads back a results file's records and rewrites the file when
// lines are to go (a half line, failed rollouts to retry).
func (st *resumeState) read(path string, raw []byte, retryFailed bool, check func(*Record) error) error {
	keep := raw
	if i := bytes.LastIndexByte(raw, '\n'); i < len(raw)-1 {
		// A last line without its newline was cut off mid-write: the
		// rollout plays again.
		keep, st.dropped = raw[:i+1], 1
	}
	var kept bytes.Buffer
	seen := map[key]int{}
	line := 0
	for rest := keep; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		text := rest[:i]
		rest = rest[i+1:]
		line++
		var r Record
		if err := json.Unmarshal(text, &r); err != nil || r.TaskID == "" {
			if err == nil {
				err = errors.New("no task_id")
			}
			return fmt.Errorf("--resume: %s line %d is not a rollout of agentenv eval (%v); remove the line or name another --out", path, line, err)
		}
		if err := check(&r); err != nil {
			return fmt.Errorf("--resume: %s line %d: %w", path, line, err)
		}
		if prev, ok := seen[r.key()]; ok {
			return fmt.Errorf("--resume: %s lines %d and %d are both sample %d of task %s; remove one", path, prev, line, r.Sample, r.TaskID)
		}
		seen[r.key()] = line
		if retryFailed && r.Failure != nil {
			st.retried++
			continue
		}
		kept.Write(text)
		kept.WriteByte('\n')
		r.Messages, r.Turns = nil, nil
		st.records = append(st.records, r)
	}
	if st.dropped == 0 && st.retried == 0 {
		return nil
	}
	return replaceFile(path, kept.Bytes())
}

// replaceFile writes b to path through a temp file renamed into place.
func replaceFile(path string, b []byte) error {
	f, err := tempfile.Create(filepath.Dir(path), filepath.Base(path)) // and remove those a killed run left
	if err != nil {
		return fmt.Errorf("rewrite %s: %w", path, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("rewrite %s: %w", path, err)
	}
	return nil
}

// append writes r as one line, in one write: a kill leaves whole lines,
// or at worst one cut-off last line, which --resume removes.
func (w *results) append(r *Record) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)              // prompts and replies are full of <tool_call>
	if err := enc.Encode(r); err != nil { // one line, ending in \n
		return fmt.Errorf("write %s: %w", w.path, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.f.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write %s: %w", w.path, err)
	}
	return nil
}

func (w *results) close() error { return w.f.Close() }

// eachRecord calls fn with each record of a results file, in file order.
func eachRecord(path string, fn func(*Record) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return nil // a last line without newline is not whole
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("read %s line %d: %w", path, line, err)
		}
		if err := fn(&r); err != nil {
			return err
		}
	}
}
