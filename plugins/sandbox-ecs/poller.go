package ecs

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"
)

// Polling: a first look soon after a task starts or is stopped (the
// stand-in and warm capacity are quick), then backing off to a look every
// few seconds, as Fargate takes tens of seconds to start a task.
const (
	firstPoll = 250 * time.Millisecond
	maxPoll   = 5 * time.Second
	// pollCall bounds one DescribeTasks round trip, retries included.
	pollCall = 30 * time.Second
)

// update is one fresh description of a watched task, or why there is none
// (err, or missing: ECS no longer knows the task).
type update struct {
	task    types.Task
	missing string // ECS's failure reason, when it does not know the task
	err     error
}

// poller describes every task that deploys and terminates are waiting on,
// 100 to a DescribeTasks call, so a step of 256 deploys costs ECS three
// calls a round rather than 256 (DescribeTasks is throttled too, and
// throttling slows every call of the client's adaptive retry, RunTask's
// included). Rounds come firstPoll after a new task is watched, then back
// off to maxPoll, with jitter.
type poller struct {
	api     API
	cluster string

	mu      sync.Mutex
	subs    map[string]map[chan update]bool // watchers by task ARN; each channel holds the latest update
	wake    chan struct{}
	running bool
}

func newPoller(api API, cluster string) *poller {
	return &poller{api: api, cluster: cluster, subs: map[string]map[chan update]bool{}, wake: make(chan struct{}, 1)}
}

// watch delivers fresh descriptions of the task until stop is called.
func (pl *poller) watch(arn string) (updates <-chan update, stop func()) {
	ch := make(chan update, 1)
	pl.mu.Lock()
	if pl.subs[arn] == nil {
		pl.subs[arn] = map[chan update]bool{}
	}
	pl.subs[arn][ch] = true
	if !pl.running {
		pl.running = true
		go pl.loop()
	}
	pl.mu.Unlock()
	select {
	case pl.wake <- struct{}{}:
	default:
	}
	return ch, func() {
		pl.mu.Lock()
		delete(pl.subs[arn], ch)
		if len(pl.subs[arn]) == 0 {
			delete(pl.subs, arn)
		}
		pl.mu.Unlock()
	}
}

// loop polls while any task is watched.
func (pl *poller) loop() {
	delay := firstPoll
	next := time.Now().Add(jitter(delay))
	for {
		select {
		case <-pl.wake:
			// A new task: look at it within firstPoll, however far the
			// backoff had gone.
			delay = firstPoll
			if soon := time.Now().Add(jitter(delay)); soon.Before(next) {
				next = soon
			}
			continue
		case <-time.After(time.Until(next)):
		}
		pl.mu.Lock()
		arns := make([]string, 0, len(pl.subs))
		for arn := range pl.subs {
			arns = append(arns, arn)
		}
		if len(arns) == 0 {
			pl.running = false
			pl.mu.Unlock()
			return
		}
		pl.mu.Unlock()
		pl.round(arns)
		delay = min(2*delay, maxPoll)
		next = time.Now().Add(jitter(delay))
	}
}

// round describes arns, 100 to a call, and hands each watcher its task.
func (pl *poller) round(arns []string) {
	for len(arns) > 0 {
		batch := arns[:min(100, len(arns))]
		arns = arns[len(batch):]
		ctx, cancel := context.WithTimeout(context.Background(), pollCall)
		out, err := pl.api.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String(pl.cluster), Tasks: batch})
		cancel()
		ups := map[string]update{}
		if err != nil {
			for _, arn := range batch {
				ups[arn] = update{err: err}
			}
		} else {
			for _, t := range out.Tasks {
				ups[aws.ToString(t.TaskArn)] = update{task: t}
			}
			for _, f := range out.Failures {
				ups[aws.ToString(f.Arn)] = update{missing: describeFailures([]types.Failure{f})}
			}
		}
		pl.mu.Lock()
		for arn, u := range ups {
			for ch := range pl.subs[arn] {
				select { // drop the stale update, if unread
				case <-ch:
				default:
				}
				ch <- u
			}
		}
		pl.mu.Unlock()
	}
}

// jitter spreads d over [d/2, d], so many servers' rounds do not align.
func jitter(d time.Duration) time.Duration { return d/2 + rand.N(d/2+1) }
