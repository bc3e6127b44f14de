// Package sft exports recorded episodes (core/transcript) as an SFT
// dataset: the parquet file `agentenv eval --sft-out` writes, through the
// same writer (eval.WriteSFTRows), so one trainer recipe reads both.
package sft

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/agentenv/agentenv/core/dataset/skyrl"
	"github.com/agentenv/agentenv/core/eval"
	"github.com/agentenv/agentenv/core/transcript"
)

// Options say which records go in and how their prompts are written.
type Options struct {
	// Filter narrows the records (task, split, ...); MinReward is the
	// least reward a record needs on top of it.
	Filter    transcript.Filter
	MinReward float64
	// Template, when set, writes each record's tools into its system
	// message as the model's chat template renders them, as eval does;
	// nil keeps the prompt as the server sent it (the trainer's template
	// added the tools, and the SFT rows then lack them).
	Template *skyrl.ChatTemplate
	Kwargs   skyrl.Kwargs
}

// Result is the file written.
type Result struct {
	File      string  `json:"file"`
	Rows      int     `json:"rows"`
	MinReward float64 `json:"min_reward"`
	// Read is what was read; Matched the records that passed the filter.
	Read    transcript.ReadStats `json:"-"`
	Matched int                  `json:"matched"`
}

// ErrNoRows is returned when no record qualifies; no file is written.
var ErrNoRows = errors.New("no recorded episode qualifies")

// Write exports the records of paths that were scored at least
// o.MinReward (and pass o.Filter) to out, a parquet file, in task id and
// start order; Sample numbers each task's episodes from 0. Each row is
// the conversation up to the model's last reply.
func Write(paths []string, out string, o Options) (*Result, error) {
	if err := o.Filter.Check(); err != nil {
		return nil, err
	}
	type found struct {
		rec  *transcript.Record
		msgs []skyrl.Message
	}
	var rows []found
	res := &Result{File: out, MinReward: o.MinReward}
	prompts := map[string][]skyrl.Message{}
	st, err := transcript.Read(paths, func(r *transcript.Record) error {
		if !o.Filter.Match(r) {
			return nil
		}
		res.Matched++
		v, ok := r.Score()
		if !ok || v < o.MinReward || len(r.Turns) == 0 {
			return nil
		}
		prompt, err := promptOf(r, o, prompts)
		if err != nil {
			return err
		}
		conv := r.Conversation()
		msgs := make([]eval.Message, 0, len(conv))
		for _, m := range prompt {
			msgs = append(msgs, eval.Message{Role: m.Role, Content: m.Content})
		}
		for _, m := range conv[len(r.Prompt):] {
			msgs = append(msgs, eval.Message{Role: m.Role, Content: m.Content})
		}
		if sm := eval.SFTMessages(msgs); sm != nil {
			rows = append(rows, found{rec: r, msgs: sm})
		}
		return nil
	})
	res.Read = st
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return res, fmt.Errorf("%w: %d records read, %d matched the filter, none scored %g or more with a reply", ErrNoRows, st.Records, res.Matched, o.MinReward)
	}
	sort.SliceStable(rows, func(a, b int) bool {
		ra, rb := rows[a].rec, rows[b].rec
		if ra.TaskID != rb.TaskID {
			return ra.TaskID < rb.TaskID
		}
		return ra.Started.Before(rb.Started)
	})
	out2 := make([]eval.SFTRow, len(rows))
	sample := map[string]int64{}
	for i, f := range rows {
		out2[i] = eval.SFTRow{Messages: f.msgs, TaskID: f.rec.TaskID, Sample: sample[f.rec.TaskID], Reward: *f.rec.Reward}
		sample[f.rec.TaskID]++
	}
	if err := eval.WriteSFTRows(out, out2); err != nil {
		return nil, err
	}
	res.Rows = len(out2)
	return res, nil
}

// promptOf is r's opening messages, its tools in the system message when
// o has a template (rendered once per task and tool list).
func promptOf(r *transcript.Record, o Options, cache map[string][]skyrl.Message) ([]skyrl.Message, error) {
	msgs := make([]skyrl.Message, len(r.Prompt))
	for i, m := range r.Prompt {
		msgs[i] = skyrl.Message{Role: m.Role, Content: m.Content}
	}
	if o.Template == nil || len(r.Tools) == 0 {
		return msgs, nil
	}
	raw, err := json.Marshal(r.OpenAITools())
	if err != nil {
		return nil, fmt.Errorf("episode %s: its tools: %w", r.EpisodeID, err)
	}
	key := r.TaskID + "\x00" + string(raw)
	if p, ok := cache[key]; ok {
		return p, nil
	}
	tools, err := skyrl.ParseTools(raw, "episode "+r.EpisodeID+"'s tools")
	if err != nil {
		return nil, err
	}
	p, err := o.Template.TaskPrompt(r.TaskID, "as recorded", msgs, tools, o.Kwargs)
	if err != nil {
		return nil, fmt.Errorf("episode %s: %w", r.EpisodeID, err)
	}
	cache[key] = p.Messages
	return p.Messages, nil
}
