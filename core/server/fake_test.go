package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/agentenv/agentenv/core/episode"
)

// fakePlayer plays scripted episodes for protocol tests. Replies:
//
//	"done"         ends the episode with reward 1
//	"fail"         EXECUTION_ERROR
//	"invalid"      VALIDATION_ERROR (episode stays open)
//	"sleep:<ms>"   answers after that long (or when cancelled)
//	"hold"         answers once the test calls release (or when cancelled)
//	"nan"          ends with a NaN metric (which JSON cannot carry)
//	anything else  a tool message echoing the reply
type fakePlayer struct {
	startDelay time.Duration
	startErr   error
	closeDelay time.Duration // teardown takes this long

	released    chan struct{} // closed by release: held steps answer
	releaseOnce sync.Once

	mu      sync.Mutex
	begun   []string // the replies whose steps began, in order
	started int
	closed  int
	live    map[string]bool // episode id -> not yet closed
	maxLive int
	seq     atomic.Int64
}

func newFakePlayer() *fakePlayer {
	return &fakePlayer{live: map[string]bool{}, released: make(chan struct{})}
}

// release lets every held step ("hold") answer, now and from then on.
func (p *fakePlayer) release() { p.releaseOnce.Do(func() { close(p.released) }) }

// stepBegun reports whether a step with this reply has begun.
func (p *fakePlayer) stepBegun(reply string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.begun {
		if r == reply {
			return true
		}
	}
	return false
}

// waitStep waits until the server runs a step with this reply: the event
// tests once guessed at with a sleep ("the step is running").
func (p *fakePlayer) waitStep(t *testing.T, reply string) {
	t.Helper()
	wait.Until(t, "the step "+reply+" to begin", func() bool { return p.stepBegun(reply) })
}

var fakeTasks = []TaskEntry{
	{Index: 0, TaskID: "day/1", Toolset: "ts1"},
	{Index: 1, TaskID: "day/2", Toolset: "ts1"},
	{Index: 2, TaskID: "quiz", Toolset: "ts2"},
}

func (p *fakePlayer) Play(req episode.Request) (episode.Episode, error) {
	task := req.TaskID
	if task == "" {
		if req.Split != "all" {
			return nil, &episode.Error{Code: episode.CodeNotFound, Err: fmt.Errorf("no split %q", req.Split)}
		}
		if *req.Index >= len(fakeTasks) {
			return nil, &episode.Error{Code: episode.CodeValidation, Err: fmt.Errorf("index %d out of range: split all has %d tasks", *req.Index, len(fakeTasks))}
		}
		task = fakeTasks[*req.Index].TaskID
	} else if !strings.HasPrefix(task, "day/") && task != "quiz" {
		return nil, &episode.Error{Code: episode.CodeNotFound, Err: fmt.Errorf("no task %q", task)}
	}
	id := req.EpisodeID
	if id == "" {
		id = "ep-" + strconv.FormatInt(p.seq.Add(1), 10)
	}
	return &fakeEpisode{p: p, id: id, task: task, maxTurns: req.MaxTurns, closedCh: make(chan struct{})}, nil
}

func (p *fakePlayer) Tools(_ context.Context, toolset string) ([]episode.Tool, error) {
	if toolset != "ts1" {
		return nil, &episode.Error{Code: episode.CodeNotFound, Err: fmt.Errorf("no toolset %q", toolset)}
	}
	return []episode.Tool{fakeTool}, nil
}

var fakeTool = episode.Tool{
	Name: "submit", Description: "Submit a schedule.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"schedule":{"type":"array"}},"required":["schedule"]}`),
}

func (p *fakePlayer) counts() (started, closed, live, maxLive int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.live {
		if l {
			n++
		}
	}
	return p.started, p.closed, n, p.maxLive
}

type fakeEpisode struct {
	p        *fakePlayer
	id, task string
	maxTurns int
	turn     int
	done     bool
	once     sync.Once
	closedCh chan struct{}
}

func (e *fakeEpisode) Abandon(episode.Cause) {}

func (e *fakeEpisode) Result() episode.Result { return episode.Result{EpisodeID: e.id} }

func (e *fakeEpisode) ID() string { return e.id }

func (e *fakeEpisode) State() episode.State {
	return episode.State{EpisodeID: e.id, TaskID: e.task, Turn: e.turn, Done: e.done, Started: true}
}

func (e *fakeEpisode) Start(ctx context.Context) (episode.Observation, error) {
	e.p.mu.Lock()
	e.p.started++
	e.p.live[e.id] = true
	n := 0
	for _, l := range e.p.live {
		if l {
			n++
		}
	}
	if n > e.p.maxLive {
		e.p.maxLive = n
	}
	e.p.mu.Unlock()
	if err := e.wait(ctx, e.p.startDelay); err != nil {
		return episode.Observation{}, err
	}
	if e.p.startErr != nil {
		return episode.Observation{}, e.p.startErr
	}
	return episode.Observation{
		EpisodeID: e.id, TaskID: e.task,
		Messages: []episode.Message{{Role: "system", Content: "You run a battery."}, {Role: "user", Content: "Prices: 1 2 3"}},
		Tools:    []episode.Tool{fakeTool},
	}, nil
}

// wait sleeps d unless ctx or Close ends it first.
func (e *fakeEpisode) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return &episode.Error{Code: episode.CodeExecution, Err: ctx.Err()}
	case <-e.closedCh:
		return &episode.Error{Code: episode.CodeExecution, Err: errors.New("episode closed")}
	}
}

func (e *fakeEpisode) Step(ctx context.Context, reply string) (episode.Observation, error) {
	obs := episode.Observation{EpisodeID: e.id, TaskID: e.task}
	e.p.mu.Lock()
	e.p.begun = append(e.p.begun, reply)
	e.p.mu.Unlock()
	switch {
	case reply == "hold":
		select {
		case <-e.p.released:
		case <-ctx.Done():
			return obs, &episode.Error{Code: episode.CodeExecution, Err: ctx.Err()}
		case <-e.closedCh:
			return obs, &episode.Error{Code: episode.CodeExecution, Err: errors.New("episode closed")}
		}
	case reply == "fail":
		return obs, &episode.Error{Code: episode.CodeExecution, Err: errors.New("env crashed")}
	case reply == "invalid":
		return obs, &episode.Error{Code: episode.CodeValidation, Err: errors.New("reply is empty")}
	case strings.HasPrefix(reply, "sleep:"):
		ms, _ := strconv.Atoi(strings.TrimPrefix(reply, "sleep:"))
		if err := e.wait(ctx, time.Duration(ms)*time.Millisecond); err != nil {
			return obs, err
		}
	}
	e.turn++
	obs.Turn = e.turn
	if reply == "done" || reply == "nan" || (e.maxTurns > 0 && e.turn >= e.maxTurns) {
		r := 1.0
		obs.Done, obs.Reward = true, &r
		e.done = true
		obs.Metrics = map[string]float64{"score/grade": 1, "tool_calls": float64(e.turn), "unparsed_calls": 0}
		if reply == "nan" {
			obs.Metrics["score/grade"] = nanValue()
		}
		return obs, nil
	}
	obs.Messages = []episode.Message{{Role: "tool", Content: "echo: " + reply}}
	return obs, nil
}

func nanValue() float64 { var z float64; return z / z }

func (e *fakeEpisode) Close(context.Context) error {
	e.once.Do(func() {
		time.Sleep(e.p.closeDelay) // a slow teardown, as the tests ask for; not a wait for timing
		close(e.closedCh)
		e.p.mu.Lock()
		e.p.closed++
		e.p.live[e.id] = false
		e.p.mu.Unlock()
	})
	return nil
}

// fakeCatalog serves fakeTasks as split "all".
type fakeCatalog struct{}

func (fakeCatalog) Splits() []Split {
	return []Split{{Name: "all", Size: len(fakeTasks)}, {Name: "train", Size: 2}}
}

func (fakeCatalog) Tasks(split string, start, stop int) ([]TaskEntry, int, error) {
	var ts []TaskEntry
	switch split {
	case "all":
		ts = fakeTasks
	case "train":
		ts = fakeTasks[:2]
	default:
		return nil, 0, &episode.Error{Code: episode.CodeNotFound, Err: fmt.Errorf("no split %q", split)}
	}
	if stop < 0 || stop > len(ts) {
		stop = len(ts)
	}
	if start > stop {
		start = stop
	}
	return ts[start:stop], len(ts), nil
}

func (fakeCatalog) Task(id string) (TaskInfo, error) {
	for _, t := range fakeTasks {
		if t.TaskID == id {
			return TaskInfo{TaskID: id, Toolset: t.Toolset, Turns: 1,
				Prompt: []episode.Message{{Role: "user", Content: "Prices: 1 2 3"}},
				Steps:  []StepInfo{{ID: "env", Type: "deploy_env"}, {ID: "play", Type: "prompt_agent"}}}, nil
		}
	}
	return TaskInfo{}, &episode.Error{Code: episode.CodeNotFound, Err: fmt.Errorf("no task %q", id)}
}
