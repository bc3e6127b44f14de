package eval

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentenv/agentenv/client"
)

// unparsedPrefix starts the tool message the server answers an unread
// tool call with (core/episode); the rest is the tool format's reason.
const unparsedPrefix = "Error: this tool call could not be read: "

// errNoReward is an episode that ended done without a reward.
var errNoReward = errors.New("the episode ended without a reward")

// worker plays rollouts one after another on one session.
type worker struct {
	r    *runner
	c    *client.Client
	sess *client.Session
}

func (w *worker) close() {
	if w.sess != nil {
		w.sess.Close()
	}
}

// run plays one rollout and records it. A rollout cut short by the end of
// ctx is not recorded: --resume plays it.
func (w *worker) run(ctx context.Context, j job) {
	rec, err := w.play(ctx, j)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		w.r.cancel(&errFatal{err})
		return
	}
	if err := w.r.record(rec); err != nil {
		w.r.cancel(&errFatal{err})
	}
}

// play plays a rollout: episodes until one is scored, the model fails, or
// the env has failed Attempts times (or ResetTimeout has passed). The
// error is fatal to the whole eval.
func (w *worker) play(ctx context.Context, j job) (*Record, error) {
	o := &w.r.o
	rec := &Record{TaskID: j.entry.TaskID, Split: o.Split, Index: j.entry.Index, Sample: j.sample,
		Model: o.ModelName, ToolFormat: o.ToolFormat, Started: time.Now().UTC()}
	deadline := rec.Started.Add(o.ResetTimeout)
	defer func() { rec.Timings.WallS = time.Since(rec.Started).Seconds() }()
	for attempt := 1; ; attempt++ {
		rec.Attempts = attempt
		err := w.attempt(ctx, j, rec, deadline)
		if err == nil || ctx.Err() != nil {
			return rec, nil
		}
		cause, retry, fatal := classify(err)
		if fatal {
			return nil, err
		}
		if retry && attempt < o.Attempts && time.Now().Before(deadline) {
			w.r.log.Warn("the env failed a rollout; playing it again on a new episode",
				"task", j.entry.TaskID, "sample", j.sample, "attempt", attempt, "error", err)
			rec.EnvErrors = append(rec.EnvErrors, err.Error())
			continue
		}
		rec.Failure = &Failure{Cause: cause, Error: err.Error()}
		return rec, nil
	}
}

// classify says what a failed attempt means: its cause, whether a new
// episode may do better (the env failed), and whether every rollout would
// fail alike (the server refuses the eval's requests).
func classify(err error) (cause string, retry, fatal bool) {
	var me *ModelError
	var fe *errFatal
	switch {
	case errors.As(err, &fe):
		return "", false, true
	case errors.As(err, &me):
		return CauseModel, false, false
	case errors.Is(err, client.CodeUnscored), errors.Is(err, errNoReward):
		return CauseUnscored, false, false
	case errors.Is(err, client.CodeValidation), errors.Is(err, client.CodeMessageTooLarge):
		return CauseRefused, false, false
	}
	// DEPLOY_FAILED, EXECUTION_ERROR, CAPACITY_REACHED past the deadline,
	// SHUTTING_DOWN, a lost connection, NO_EPISODE (the server dropped it).
	return CauseEnv, true, false
}

// attempt plays one episode of the rollout into rec. Its error is the
// attempt's failure; errFatal for one that stops the eval.
func (w *worker) attempt(ctx context.Context, j job, rec *Record, deadline time.Time) error {
	o := &w.r.o
	rec.Messages, rec.Turns, rec.Unparsed, rec.EpisodeID = nil, nil, nil, ""
	rctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if w.sess == nil {
		sess, err := w.c.Connect(rctx)
		if err != nil {
			return fmt.Errorf("open a session: %w", err)
		}
		w.sess = sess
	}
	t0 := time.Now()
	res, err := w.sess.Reset(rctx, client.ResetRequest{Split: o.Split, Index: j.entry.Index, ToolFormat: o.ToolFormat, MaxTurns: o.MaxTurns})
	d := time.Since(t0).Seconds()
	rec.Timings.EnvS += d
	rec.Timings.ResetS += d
	if err != nil {
		if errors.Is(err, client.CodeValidation) || errors.Is(err, client.CodeNotFound) || errors.Is(err, client.CodeUnauthorized) {
			return &errFatal{fmt.Errorf("the server refused to start task %s: %w", j.entry.TaskID, err)}
		}
		return err
	}
	obs := res.Observation
	rec.EpisodeID = obs.EpisodeID
	if obs.TaskID != j.entry.TaskID {
		return &errFatal{fmt.Errorf("split %s index %d is task %s on the server now, not %s: the bundle changed under the eval", o.Split, j.entry.Index, obs.TaskID, j.entry.TaskID)}
	}
	msgs, err := w.r.prompt(ctx, j.entry, obs.Messages)
	if err != nil {
		return err
	}
	if err := w.sameTools(ctx, j, obs.Tools); err != nil {
		return err
	}
	for !res.Done {
		t0 := time.Now()
		reply, err := o.Model.Complete(ctx, msgs)
		turn := Turn{ModelS: time.Since(t0).Seconds()}
		rec.Timings.ModelS += turn.ModelS
		if err != nil {
			rec.Messages = msgs
			return err
		}
		turn.FinishReason, turn.PromptTokens, turn.CompletionTokens = reply.FinishReason, reply.PromptTokens, reply.CompletionTokens
		rec.Usage.PromptTokens += reply.PromptTokens
		rec.Usage.CompletionTokens += reply.CompletionTokens
		msgs = append(msgs, Message{Role: "assistant", Content: reply.Text})
		sctx, cancel := context.WithTimeout(ctx, stepTimeout)
		t0 = time.Now()
		res, err = w.sess.Step(sctx, reply.Text)
		cancel()
		turn.EnvS = time.Since(t0).Seconds()
		rec.Timings.EnvS += turn.EnvS
		rec.Turns = append(rec.Turns, turn)
		if err != nil {
			rec.Messages = msgs
			return err
		}
		for _, m := range res.Observation.Messages {
			msgs = append(msgs, Message{Role: m.Role, Content: m.Content})
			if reason, ok := strings.CutPrefix(m.Content, unparsedPrefix); ok && m.Role == "tool" {
				rec.Unparsed = append(rec.Unparsed, Unparsed{Turn: len(rec.Turns), Reason: reason})
			}
		}
	}
	rec.Messages = msgs
	if res.Reward == nil {
		return errNoReward
	}
	rec.Reward = res.Reward
	rec.Scores, rec.Metrics = map[string]float64{}, map[string]float64{}
	for k, v := range res.Observation.Metrics {
		if id, ok := strings.CutPrefix(k, "score/"); ok {
			rec.Scores[id] = v
		} else {
			rec.Metrics[k] = v
		}
	}
	return nil
}

// sameTools checks the episode offers the tools its toolset lists: those
// the prompt shows the model.
func (w *worker) sameTools(ctx context.Context, j job, offered []client.Tool) error {
	tools, err := w.r.toolsetTools(ctx, j.entry.Toolset)
	if err != nil {
		return err
	}
	var got []string
	for _, t := range offered {
		got = append(got, t.Function.Name)
	}
	if strings.Join(got, ",") != strings.Join(tools.Names(), ",") {
		return &errFatal{fmt.Errorf("task %s offers the tools %v, but its toolset %s lists %v, which the prompt shows the model", j.entry.TaskID, got, j.entry.Toolset, tools.Names())}
	}
	return nil
}
