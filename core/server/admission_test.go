package server

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The admission queue is channels and timers only, so its tests run in a
// synctest bubble: waits are exact, and they take no wall time.

func TestAdmissionFIFO(t *testing.T) { synctest.Test(t, testAdmissionFIFO) }

func testAdmissionFIFO(t *testing.T) {
	a := newAdmission(1, nil)
	if err := a.acquire(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.acquire(context.Background(), guard); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			a.release()
		}()
		// Queue them in a known order: each waits in the queue before
		// the next starts.
		synctest.Wait()
		if _, q := a.counts(); q != i+1 {
			t.Fatalf("%d queued, want %d", q, i+1)
		}
	}
	a.release()
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("served in order %v, want FIFO", order)
		}
	}
	if active, queued := a.counts(); active != 0 || queued != 0 {
		t.Fatalf("active %d queued %d at the end", active, queued)
	}
}

func TestAdmissionOutcomes(t *testing.T) {
	cases := []struct {
		name string
		run  func(a *admission) error
		want error
	}{
		{"timeout", func(a *admission) error { return a.acquire(context.Background(), 20*time.Millisecond) }, errCapacity},
		{"cancelled", func(a *admission) error {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			return a.acquire(ctx, time.Minute)
		}, context.Canceled},
		{"closed while waiting", func(a *admission) error {
			time.AfterFunc(20*time.Millisecond, a.close)
			return a.acquire(context.Background(), time.Minute)
		}, errShuttingDown},
		{"closed before", func(a *admission) error { a.close(); return a.acquire(context.Background(), time.Minute) }, errShuttingDown},
		{"zero wait when full", func(a *admission) error { return a.acquire(context.Background(), 0) }, errCapacity},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var gauges [2]int
				a := newAdmission(1, func(active, queued int) { gauges = [2]int{active, queued} })
				if err := a.acquire(context.Background(), 0); err != nil {
					t.Fatal(err)
				}
				if err := tc.run(a); !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want %v", err, tc.want)
				}
				if _, queued := a.counts(); queued != 0 || gauges[1] != 0 {
					t.Fatalf("waiter left in the queue: %d (gauge %d)", queued, gauges[1])
				}
			})
		})
	}
}

// A slot handed over as the waiter gives up is kept, not lost.
func TestAdmissionNoLostSlots(t *testing.T) { synctest.Test(t, testAdmissionNoLostSlots) }

func testAdmissionNoLostSlots(t *testing.T) {
	a := newAdmission(2, nil)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// In the bubble many waits end at the same instant as a
			// release: the race under test, at its most likely.
			if a.acquire(context.Background(), time.Duration(1+i%3)*time.Millisecond) == nil {
				time.Sleep(time.Millisecond) // holds the slot while others give up (bubble time)
				a.release()
			}
		}()
	}
	wg.Wait()
	if active, queued := a.counts(); active != 0 || queued != 0 {
		t.Fatalf("active %d queued %d after all released", active, queued)
	}
}
