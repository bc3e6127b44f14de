package eval

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/agentenv/agentenv/client"
)

func TestSummary(t *testing.T) {
	tl := newTally()
	recs := []Record{
		{Reward: reward(1), Scores: map[string]float64{"grade": 1}, Attempts: 1,
			Metrics: map[string]float64{"tool_calls": 2, "turns": 3}, Timings: Timings{WallS: 2, ModelS: 0.5, EnvS: 1.5}, Usage: Usage{CompletionTokens: 10}},
		{Reward: reward(0.5), Scores: map[string]float64{"grade": 0.5, "format": 1}, Attempts: 2,
			Metrics:  map[string]float64{"tool_calls": 1, "unparsed_calls": 2, "invalid_calls": 1, "tool_errors": 1, "turns": 4},
			Unparsed: []Unparsed{{1, "bad json"}, {2, "bad json"}}, Timings: Timings{WallS: 4, ModelS: 1, EnvS: 3}},
		{Failure: &Failure{Cause: CauseModel, Error: "HTTP 500: boom"}, Attempts: 1, Unparsed: []Unparsed{{1, "no name"}}, Timings: Timings{WallS: 1, ModelS: 1}},
		{Failure: &Failure{Cause: CauseModel, Error: "timed out"}, Attempts: 1},
		{Failure: &Failure{Cause: CauseEnv, Error: "DEPLOY_FAILED"}, Attempts: 3},
	}
	for i := range recs {
		tl.add(&recs[i])
	}
	if m := tl.mean(); m != 0.3 {
		t.Errorf("running mean %v, want 0.3 (failed count 0)", m)
	}
	s := tl.summary()
	// rewards 1, 0.5, 0, 0, 0: mean 0.3, sample variance (0.49+0.04+3·0.09)/4 = 0.2
	if s.Rollouts != 5 || s.Scored != 2 || s.Failed != 3 || s.MeanReward != 0.3 || math.Abs(s.StdErr-math.Sqrt(0.2/5)) > 1e-12 || s.MeanScored != 0.75 {
		t.Fatalf("%+v", s)
	}
	if fmt.Sprint(s.Scores) != "map[format:1 grade:0.75]" || fmt.Sprint(s.Failures) != "map[env:1 model:2]" ||
		s.FailureExamples["model"] != "HTTP 500: boom" || s.Replayed != 2 {
		t.Fatalf("%+v", s)
	}
	if s.ToolCalls != 3 || s.UnparsedCalls != 2 || s.InvalidCalls != 1 || s.ToolErrors != 1 || s.MeanTurns != 3.5 ||
		fmt.Sprint(s.UnparsedReasons) != "[{bad json 2} {no name 1}]" {
		t.Fatalf("%+v", s)
	}
	if s.ModelS != 2.5 || s.EnvS != 4.5 || s.MeanModelS != 0.5 || s.MeanWallS != 1.4 || s.CompletionTokens != 10 {
		t.Fatalf("%+v", s)
	}
	// The summary shares nothing with the tally.
	s.Failures["model"] = 99
	if tl.summary().Failures["model"] != 2 {
		t.Fatal("summary aliases the tally")
	}
	if one := newTally(); true {
		one.add(&recs[0])
		if s := one.summary(); s.StdErr != 0 || s.MeanReward != 1 {
			t.Fatalf("one rollout: %+v", s)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err          error
		cause        string
		retry, fatal bool
	}{
		{&ModelError{Status: 500, Err: errors.New("x")}, CauseModel, false, false},
		{fmt.Errorf("step: %w", &client.Error{Code: client.CodeExecutionError}), CauseEnv, true, false},
		{fmt.Errorf("reset: %w", &client.Error{Code: client.CodeDeployFailed}), CauseEnv, true, false},
		{fmt.Errorf("step: %w", client.ErrDisconnected), CauseEnv, true, false},
		{fmt.Errorf("step: %w", &client.Error{Code: client.CodeUnscored}), CauseUnscored, false, false},
		{errNoReward, CauseUnscored, false, false},
		{fmt.Errorf("step: %w", &client.Error{Code: client.CodeMessageTooLarge}), CauseRefused, false, false},
		{&errFatal{errors.New("x")}, "", false, true},
	} {
		cause, retry, fatal := classify(c.err)
		if cause != c.cause || retry != c.retry || fatal != c.fatal {
			t.Errorf("%v: %s %v %v, want %s %v %v", c.err, cause, retry, fatal, c.cause, c.retry, c.fatal)
		}
	}
}
