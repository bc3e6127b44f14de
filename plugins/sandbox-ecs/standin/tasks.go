package standin

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Runner runs tasks' containers (Docker does, on the local engine).
type Runner interface {
	// Start runs a container and returns once it has started. An image
	// the engine does not have is ErrNoImage (wrapped).
	Start(ctx context.Context, spec RunSpec) (Container, error)
	// Close removes whatever the runner still holds.
	Close(ctx context.Context) error
}

// Container is one running container.
type Container interface {
	// Exited yields the exit code once the container exits by itself.
	Exited() <-chan int
	// Stop stops the container (SIGTERM, SIGKILL after grace) and removes it.
	Stop(ctx context.Context, grace time.Duration) error
}

// RunSpec is what a task runs: its essential container.
type RunSpec struct {
	Task    string // the task's id
	Name    string // the container's name in the task definition
	Image   string
	Command []string
	Env     []string // KEY=value
	// IP is the task's private IP: the container's ports are published on
	// it under the same numbers.
	IP    netip.Addr
	Ports []int
}

// ErrNoImage is returned by Runner.Start for an image the engine lacks.
var ErrNoImage = errors.New("no such image")

// liveTask is a task and what drives it; t is guarded by Server.mu.
type liveTask struct {
	t         task
	ip        netip.Addr
	spec      RunSpec
	failStart string // injected: stop in PENDING with this reason

	stop     chan struct{}
	stopOnce sync.Once
	stopCode string
}

// requestStop marks the task to stop (desired STOPPED); call with
// Server.mu held. The first reason given wins, as in ECS.
func (lt *liveTask) requestStop(reason, code string) {
	if lt.t.DesiredStatus == "STOPPED" {
		return
	}
	lt.t.DesiredStatus = "STOPPED"
	lt.t.StoppedReason = reason
	lt.stopCode = code
	lt.t.Version++
	lt.stopOnce.Do(func() { close(lt.stop) })
}

// update changes the task under the lock.
func (s *Server) update(lt *liveTask, f func(t *task)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&lt.t)
	lt.t.Version++
}

// setStatus moves the task and its containers to status.
func (s *Server) setStatus(lt *liveTask, status string) {
	s.update(lt, func(t *task) {
		t.LastStatus = status
		for i := range t.Containers {
			if t.Containers[i].LastStatus != "STOPPED" {
				t.Containers[i].LastStatus = containerStatus(status)
			}
		}
		for i := range t.Attachments {
			t.Attachments[i].Status = attachmentStatus(status)
		}
		now := epoch(time.Now())
		switch status {
		case "RUNNING":
			t.StartedAt = now
		case "DEACTIVATING":
			t.StoppingAt = now
		}
	})
}

func containerStatus(task string) string {
	switch task {
	case "PROVISIONING", "PENDING":
		return "PENDING"
	case "RUNNING", "DEACTIVATING":
		return "RUNNING"
	}
	return "STOPPED"
}

func attachmentStatus(task string) string {
	switch task {
	case "PROVISIONING":
		return "PRECREATED"
	case "DEPROVISIONING":
		return "DELETED"
	case "STOPPED":
		return "DELETED"
	}
	return "ATTACHED"
}

// finish marks the task STOPPED (reason and code unless StopTask gave
// them first) and frees its address.
func (s *Server) finish(lt *liveTask, reason, code string, exit *int, containerReason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lt.requestStop(reason, code)
	t := &lt.t
	t.LastStatus = "STOPPED"
	t.StopCode = lt.stopCode
	t.StoppedAt = epoch(time.Now())
	if t.StoppingAt.IsZero() {
		t.StoppingAt = t.StoppedAt
	}
	for i := range t.Containers {
		t.Containers[i].LastStatus = "STOPPED"
		if exit != nil {
			t.Containers[i].ExitCode = exit
		}
		if containerReason != "" {
			t.Containers[i].Reason = containerReason
		}
	}
	for i := range t.Attachments {
		t.Attachments[i].Status = "DELETED"
	}
	t.Version++
	s.ips.release(lt.ip)
}

// pause waits d, or until the task is told to stop (true).
func pause(lt *liveTask, d time.Duration) bool {
	select {
	case <-lt.stop:
		return true
	case <-time.After(d):
		return false
	}
}

// run drives a task from PROVISIONING to STOPPED.
func (s *Server) run(lt *liveTask) {
	defer s.wg.Done()
	if pause(lt, s.opts.Provisioning) {
		s.finish(lt, "", "", nil, "")
		return
	}
	s.setStatus(lt, "PENDING")
	if lt.failStart != "" {
		s.finish(lt, lt.failStart, "TaskFailedToStart", nil, firstWord(lt.failStart))
		return
	}
	var c Container
	if s.opts.Runner != nil {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-lt.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		var err error
		c, err = s.opts.Runner.Start(ctx, lt.spec)
		cancel()
		if err != nil {
			reason := "CannotStartContainerError: " + err.Error()
			if errors.Is(err, ErrNoImage) {
				reason = "CannotPullContainerError: pull image manifest has been retried 5 time(s): " + lt.spec.Image + ": not found"
			}
			s.finish(lt, reason, "TaskFailedToStart", nil, firstWord(reason))
			return
		}
	}
	stopContainer := func() {
		if c == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.StopGrace+30*time.Second)
		defer cancel()
		_ = c.Stop(ctx, s.opts.StopGrace)
	}
	var exited <-chan int
	if c != nil {
		exited = c.Exited()
	}
	if pause(lt, s.opts.Pending) {
		stopContainer()
		s.finish(lt, "", "", nil, "")
		return
	}
	select {
	case code := <-exited: // died while starting: never RUNNING
		stopContainer()
		s.finish(lt, "Essential container in task exited", "EssentialContainerExited", &code, "")
		return
	default:
	}
	s.setStatus(lt, "RUNNING")
	select {
	case <-lt.stop:
		s.setStatus(lt, "DEACTIVATING")
		s.setStatus(lt, "STOPPING")
		stopContainer()
		s.setStatus(lt, "DEPROVISIONING")
		s.finish(lt, "", "", nil, "")
	case code := <-exited:
		stopContainer()
		s.finish(lt, "Essential container in task exited", "EssentialContainerExited", &code, "")
	}
}

func firstWord(reason string) string {
	w, _, _ := strings.Cut(reason, ":")
	return w
}
