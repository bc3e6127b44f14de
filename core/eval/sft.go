package eval

import (
	"fmt"
	"sort"

	"github.com/agentenv/agentenv/core/dataset/skyrl"
)

// SFTRow is one row of the SFT file: a conversational example as TRL's
// SFTTrainer and SkyRL's SFT read it (the messages column), with the
// rollout it came from beside it.
type SFTRow struct {
	// Messages is the prompt with its tools in the system message, the
	// model's replies as it wrote them (tool calls in its own format) and
	// the tool answers, up to the last reply.
	Messages []skyrl.Message `parquet:"messages,list"`
	TaskID   string          `parquet:"task_id"`
	Sample   int64           `parquet:"sample"`
	Reward   float64         `parquet:"reward"`
}

// SFTResult is the SFT file written.
type SFTResult struct {
	File      string  `json:"file"`
	Rows      int     `json:"rows"`
	MinReward float64 `json:"min_reward"`
}

// sftKind tags the SFT file's metadata (agentenv.rows).
const sftKind = "sft/1"

// WriteSFT writes the rollouts of the results file in that scored at
// least minReward to out, a parquet file, in task and sample order.
func WriteSFT(in, out string, minReward float64) (*SFTResult, error) {
	type indexed struct {
		row   SFTRow
		index int
	}
	var found []indexed
	err := eachRecord(in, func(r *Record) error {
		if r.Failure != nil || r.Reward == nil || *r.Reward < minReward {
			return nil
		}
		if msgs := SFTMessages(r.Messages); msgs != nil {
			found = append(found, indexed{SFTRow{Messages: msgs, TaskID: r.TaskID, Sample: int64(r.Sample), Reward: *r.Reward}, r.Index})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("--sft-out: %w", err)
	}
	sort.SliceStable(found, func(a, b int) bool {
		if found[a].index != found[b].index {
			return found[a].index < found[b].index
		}
		return found[a].row.Sample < found[b].row.Sample
	})
	sorted := make([]SFTRow, len(found))
	for i, f := range found {
		sorted[i] = f.row
	}
	if err := WriteSFTRows(out, sorted); err != nil {
		return nil, fmt.Errorf("--sft-out: %w", err)
	}
	return &SFTResult{File: out, Rows: len(sorted), MinReward: minReward}, nil
}

// WriteSFTRows writes rows to out, a parquet file, as they are: the SFT
// file eval writes, for other sources of rollouts (agentenv transcripts).
func WriteSFTRows(out string, rows []SFTRow) error {
	return skyrl.WriteParquet(out, rows, sftKind)
}

// SFTMessages is a rollout's conversation up to its last reply: what
// follows it (the last tool answers) is nothing the model is trained to
// write. nil when the model never replied.
func SFTMessages(msgs []Message) []skyrl.Message {
	last := -1
	for i, m := range msgs {
		if m.Role == "assistant" {
			last = i
		}
	}
	if last < 0 {
		return nil
	}
	out := make([]skyrl.Message, last+1)
	for i, m := range msgs[:last+1] {
		out[i] = skyrl.Message{Role: m.Role, Content: m.Content}
	}
	return out
}
