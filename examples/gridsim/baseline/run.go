package baseline

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/agentenv/agentenv/core/bundle"
)

// Result is one task played.
type Result struct {
	TaskID   string
	Grade    float64
	Schedule []int
	Err      error
}

// Runner plays one task with one policy and returns its grade.
type Runner interface {
	Run(ctx context.Context, task *bundle.Task, p Policy) (Result, error)
}

// RunAll plays every task with p, parallel at a time, and returns the
// results in task order. A task that fails has its Err set; RunAll itself
// fails only when ctx ends.
func RunAll(ctx context.Context, r Runner, tasks []*bundle.Task, p Policy, parallel int) ([]Result, error) {
	if parallel < 1 {
		parallel = 1
	}
	results := make([]Result, len(tasks))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res, err := r.Run(ctx, tasks[i], p)
				if err != nil {
					res = Result{TaskID: tasks[i].ID, Err: err}
				}
				results[i] = res
			}
		}()
	}
feed:
	for i := range tasks {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("playing %s: %w", p.Name(), err)
	}
	return results, nil
}

// Summary is a policy's results over a split.
type Summary struct {
	Policy   string
	Tasks    int
	Failed   int
	Mean     float64 // over the tasks that played
	Min, Max float64
	// Exact counts tasks graded exactly 1 and Idle those graded exactly 0.2.
	Exact, Idle int
}

// Summarize sums results up.
func Summarize(policy string, results []Result) Summary {
	s := Summary{Policy: policy, Tasks: len(results), Min: math.Inf(1), Max: math.Inf(-1)}
	var sum float64
	for _, r := range results {
		if r.Err != nil {
			s.Failed++
			continue
		}
		sum += r.Grade
		s.Min, s.Max = math.Min(s.Min, r.Grade), math.Max(s.Max, r.Grade)
		switch r.Grade {
		case 1:
			s.Exact++
		case 0.2:
			s.Idle++
		}
	}
	if played := s.Tasks - s.Failed; played > 0 {
		s.Mean = sum / float64(played)
	} else {
		s.Min, s.Max = 0, 0
	}
	return s
}

// Failures returns the failed results, at most n, by task id.
func Failures(results []Result, n int) []Result {
	var out []Result
	for _, r := range results {
		if r.Err != nil {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].TaskID < out[b].TaskID })
	if len(out) > n {
		out = out[:n]
	}
	return out
}
