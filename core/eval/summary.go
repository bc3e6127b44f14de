package eval

import (
	"maps"
	"math"
	"sort"
)

// Summary sums up every rollout of the results file: those found there
// when the eval started (--resume) and those played since.
type Summary struct {
	Split      string `json:"split"`
	Model      string `json:"model"`
	ToolFormat string `json:"tool_format"`
	// Rollouts is the rollouts in the results file; Expected the split's
	// tasks (or --limit) times --samples.
	Rollouts int `json:"rollouts"`
	Expected int `json:"expected"`
	// Resumed were in the file at the start; Played were played by this
	// run (written); Retried failed rollouts were removed to play again.
	Resumed int `json:"resumed"`
	Played  int `json:"played"`
	Retried int `json:"retried,omitempty"`
	Scored  int `json:"scored"`
	Failed  int `json:"failed"`
	// MeanReward is over every rollout, a failed one counting 0 (as
	// SkyRL scores a failed eval rollout); StdErr is its standard error
	// (sample standard deviation / √n). MeanScored leaves the failed out.
	MeanReward float64 `json:"mean_reward"`
	StdErr     float64 `json:"stderr"`
	MeanScored float64 `json:"mean_scored"`
	// Scores is each score's mean over the scored rollouts.
	Scores map[string]float64 `json:"scores"`
	// Failures counts the failed rollouts by cause; FailureExamples
	// holds the first error of each cause.
	Failures        map[string]int    `json:"failures"`
	FailureExamples map[string]string `json:"failure_examples,omitempty"`
	// Replayed counts rollouts the env failed at least once (more than one
	// attempt).
	Replayed int `json:"replayed"`
	// Calls sums the scored rollouts' metrics; UnparsedReasons counts the
	// unread calls by reason, most frequent first.
	ToolCalls       int           `json:"tool_calls"`
	UnparsedCalls   int           `json:"unparsed_calls"`
	InvalidCalls    int           `json:"invalid_calls"`
	ToolErrors      int           `json:"tool_errors"`
	UnparsedReasons []ReasonCount `json:"unparsed_reasons,omitempty"`
	MeanTurns       float64       `json:"mean_turns"`
	// Time: ModelS and EnvS sum every rollout's time in the model and the
	// env; the means are per rollout. WallS is this run's wall time.
	ModelS     float64 `json:"model_s"`
	EnvS       float64 `json:"env_s"`
	MeanModelS float64 `json:"mean_model_s"`
	MeanEnvS   float64 `json:"mean_env_s"`
	MeanWallS  float64 `json:"mean_wall_s"`
	WallS      float64 `json:"wall_s"`
	// CompletionTokens sums the endpoint's usage.
	CompletionTokens int `json:"completion_tokens"`
	// Interrupted: the run stopped before every rollout played.
	Interrupted bool       `json:"interrupted"`
	SFT         *SFTResult `json:"sft,omitempty"`
}

// ReasonCount is how many unread calls gave a reason.
type ReasonCount struct {
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// tally accumulates records into a Summary.
type tally struct {
	s            Summary
	sum, sumSq   float64
	scoredSum    float64
	scoreSums    map[string]float64
	scoreCounts  map[string]int
	reasons      map[string]int
	turns, walls float64
}

func newTally() *tally {
	return &tally{scoreSums: map[string]float64{}, scoreCounts: map[string]int{}, reasons: map[string]int{},
		s: Summary{Scores: map[string]float64{}, Failures: map[string]int{}, FailureExamples: map[string]string{}}}
}

func (t *tally) add(r *Record) {
	s := &t.s
	s.Rollouts++
	if r.Attempts > 1 {
		s.Replayed++
	}
	s.ModelS += r.Timings.ModelS
	s.EnvS += r.Timings.EnvS
	t.walls += r.Timings.WallS
	s.CompletionTokens += r.Usage.CompletionTokens
	for _, u := range r.Unparsed {
		t.reasons[u.Reason]++
	}
	if r.Failure != nil || r.Reward == nil {
		s.Failed++
		cause := CauseUnscored
		if r.Failure != nil {
			cause = r.Failure.Cause
			if _, ok := s.FailureExamples[cause]; !ok {
				s.FailureExamples[cause] = r.Failure.Error
			}
		}
		s.Failures[cause]++
		return
	}
	s.Scored++
	v := *r.Reward
	t.sum += v
	t.sumSq += v * v
	t.scoredSum += v
	for id, sc := range r.Scores {
		t.scoreSums[id] += sc
		t.scoreCounts[id]++
	}
	s.ToolCalls += int(r.Metrics["tool_calls"])
	s.UnparsedCalls += int(r.Metrics["unparsed_calls"])
	s.InvalidCalls += int(r.Metrics["invalid_calls"])
	s.ToolErrors += int(r.Metrics["tool_errors"])
	t.turns += r.Metrics["turns"]
}

// mean is the running mean reward, a failed rollout counting 0.
func (t *tally) mean() float64 {
	if t.s.Rollouts == 0 {
		return 0
	}
	return t.sum / float64(t.s.Rollouts)
}

func (t *tally) summary() Summary {
	s := t.s
	n := float64(s.Rollouts)
	if n > 0 {
		s.MeanReward = t.sum / n
		s.MeanModelS, s.MeanEnvS, s.MeanWallS = s.ModelS/n, s.EnvS/n, t.walls/n
	}
	if n > 1 {
		variance := (t.sumSq - t.sum*t.sum/n) / (n - 1)
		s.StdErr = math.Sqrt(max(0, variance) / n)
	}
	if s.Scored > 0 {
		s.MeanScored = t.scoredSum / float64(s.Scored)
		s.MeanTurns = t.turns / float64(s.Scored)
	}
	s.Scores = map[string]float64{}
	for id, sum := range t.scoreSums {
		s.Scores[id] = sum / float64(t.scoreCounts[id])
	}
	// Copies: a Summary handed out shares nothing with the tally.
	s.Failures = maps.Clone(s.Failures)
	s.FailureExamples = maps.Clone(s.FailureExamples)
	s.UnparsedReasons = nil
	for r, c := range t.reasons {
		s.UnparsedReasons = append(s.UnparsedReasons, ReasonCount{r, c})
	}
	sort.Slice(s.UnparsedReasons, func(a, b int) bool {
		x, y := s.UnparsedReasons[a], s.UnparsedReasons[b]
		if x.Count != y.Count {
			return x.Count > y.Count
		}
		return x.Reason < y.Reason
	})
	return s
}
