package sandbox

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

type countingPreparer struct {
	runs atomic.Int32
	err  func(ctx context.Context) error
}

func (c *countingPreparer) Prepare(ctx context.Context, _ Spec) error {
	c.runs.Add(1)
	if c.err != nil {
		return c.err(ctx)
	}
	return nil
}

func TestPrepareRunsOncePerEnv(t *testing.T) {
	cases := []struct {
		name     string
		err      func(ctx context.Context) error
		calls    int
		wantRuns int32
		wantErr  bool
	}{
		{"success runs once", nil, 8, 1, false},
		{"failure is not retried", func(context.Context) error { return errors.New("build failed") }, 3, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cp := &countingPreparer{err: tc.err}
			p := &preparer{impl: cp, envs: map[string]*prepared{}}
			var wg sync.WaitGroup
			errs := make([]error, tc.calls)
			for i := range tc.calls {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = p.prepare(context.Background(), Spec{Env: "a", Dir: "/x"}) }()
			}
			wg.Wait()
			if got := cp.runs.Load(); got != tc.wantRuns {
				t.Errorf("Prepare ran %d times, want %d", got, tc.wantRuns)
			}
			for _, err := range errs {
				if (err != nil) != tc.wantErr {
					t.Errorf("prepare error = %v, want error %v", err, tc.wantErr)
				}
			}
			// Another env is prepared on its own.
			if err := p.prepare(context.Background(), Spec{Env: "b", Dir: "/x"}); (err != nil) != tc.wantErr {
				t.Errorf("second env: %v", err)
			}
			if got := cp.runs.Load(); got != tc.wantRuns+1 {
				t.Errorf("after a second env Prepare ran %d times, want %d", got, tc.wantRuns+1)
			}
		})
	}
}

func TestPrepareCutShortIsRetried(t *testing.T) {
	// Cut short while it runs (a context cancelled before the call may
	// not reach Prepare at all: the wait for the env's turn sees it first).
	ctx, cancel := context.WithCancel(context.Background())
	cp := &countingPreparer{err: func(ctx context.Context) error { cancel(); return ctx.Err() }}
	p := &preparer{impl: cp, envs: map[string]*prepared{}}
	if err := p.prepare(ctx, Spec{Env: "a"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cut-short prepare: %v", err)
	}
	cp.err = nil
	if err := p.prepare(context.Background(), Spec{Env: "a"}); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if got := cp.runs.Load(); got != 2 {
		t.Fatalf("Prepare ran %d times, want 2 (the cut-short one and the retry)", got)
	}
}

func TestNoPreparerIsANoOp(t *testing.T) {
	p := &preparer{envs: map[string]*prepared{}}
	if err := p.prepare(context.Background(), Spec{Env: "a"}); err != nil {
		t.Fatal(err)
	}
}

func TestExecUnsupported(t *testing.T) {
	_, err := ExecUnsupported{}.Exec(context.Background(), Sandbox{ID: "sb-1"}, []string{"true"})
	if !errors.Is(err, ErrExecUnsupported) || !strings.Contains(err.Error(), "sb-1") {
		t.Fatalf("Exec = %v, want ErrExecUnsupported naming the sandbox", err)
	}
}
