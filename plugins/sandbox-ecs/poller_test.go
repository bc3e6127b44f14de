package ecs

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/agentenv/agentenv/plugins/sandbox-ecs/standin"
	"github.com/agentenv/agentenv/plugins/sandbox-ecs/standin/standintest"
)

// 150 deploys at once wait for RUNNING together: their DescribeTasks go
// 100 tasks to a call, a round at a time, not one call per deploy.
func TestDeploysShareDescribeTasks(t *testing.T) {
	const n = 150
	s := standintest.Start(t, nil, standin.Options{Pending: 600 * time.Millisecond})
	p := newPlugin(t, s.URL, map[string]any{"launch_rate": 1e6, "launch_burst": n})
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := p.Deploy(context.Background(), spec("listener:1", labels("srv", fmt.Sprint("ep", i))))
			if err == nil {
				err = p.Terminate(context.Background(), sb)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Each deploy is PENDING for 0.6 s: polled one at a time, with the
	// backoff from 0.25 s, that is 2-3 calls each (300-450); shared, a
	// handful of rounds of two calls. Terminates add one describe each
	// (n) and share their waits too.
	d := s.Calls()["DescribeTasks"]
	t.Logf("%d DescribeTasks calls for %d deploys and terminates", d, n)
	if d > n+40 {
		t.Errorf("%d DescribeTasks calls for %d deploys and terminates; want them shared (at most %d)", d, n, n+40)
	}
}

// Two watchers of one task both get its updates, and a round with no
// watcher left ends the poller.
func TestPollerWatchers(t *testing.T) {
	s := standintest.Start(t, nil, standin.Options{})
	p := newPlugin(t, s.URL, nil)
	sb, err := p.Deploy(context.Background(), spec("listener:1", labels("srv", "ep")))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Terminate(context.Background(), sb)
	st, _ := decodeState(sb)
	setup, _ := p.setup()
	pl := setup.poller(st.Cluster)
	a, stopA := pl.watch(st.Task)
	b, stopB := pl.watch(st.Task)
	for _, ch := range []<-chan update{a, b} {
		select {
		case u := <-ch:
			if u.err != nil || aws.ToString(u.task.LastStatus) != "RUNNING" {
				t.Errorf("update %+v", u)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("a watcher got no update")
		}
	}
	stopA()
	stopB()
	wait.Until(t, "the poller to stop with nothing to watch", func() bool {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		return !pl.running
	})
}
