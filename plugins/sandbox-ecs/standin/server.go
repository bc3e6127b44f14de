// Package standin is a stand-in for AWS ECS, for tests: an HTTP server
// speaking the ECS JSON 1.1 API (X-Amz-Target
// AmazonEC2ContainerServiceV20141113.<Op>) for the operations sandbox-ecs
// uses: RegisterTaskDefinition, DescribeTaskDefinition, RunTask,
// DescribeTasks, ListTasks and StopTask. Tasks move through ECS's states
// (PROVISIONING → PENDING → RUNNING → DEACTIVATING → STOPPING →
// DEPROVISIONING → STOPPED), errors come back as ECS's (__type and message,
// status 400 or 500), and faults can be injected: a capacity failure in
// RunTask's failures, a task that stops before RUNNING with a reason,
// ThrottlingException, a RunTask reply lost after the task started.
//
// With a Docker runner each task's image runs as a container on the local
// engine, and the task's private IP is a loopback address of its own
// (127.a.b.c) on which the container's ports are published under the same
// numbers: what the plugin forms as privateIP:port reaches the env, as it
// would in a VPC. Without one (the benchmarks' no-Docker mode) tasks only
// move through their states. Credentials and signatures are not checked.
package standin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// targetPrefix starts the X-Amz-Target of every ECS operation.
const targetPrefix = "AmazonEC2ContainerServiceV20141113."

// Options configure a Server. The zero value runs no containers, knows the
// cluster "default" and moves tasks through their states in milliseconds.
type Options struct {
	// Runner runs tasks' containers; nil runs none (tasks still reach
	// RUNNING, with an address nothing listens on).
	Runner Runner
	// Clusters are the clusters that exist, besides "default".
	Clusters []string
	Region   string // default us-east-1
	Account  string // default 000000000000
	// Provisioning and Pending are how long a task stays in each state
	// (0: 5ms).
	Provisioning, Pending time.Duration
	// StopGrace is how long a stopped container gets between SIGTERM and
	// SIGKILL (0: 2s; ECS's default is 30s).
	StopGrace time.Duration
	// RunTaskRate and RunTaskBurst, when RunTaskRate is set, throttle
	// RunTask as ECS does: calls beyond the bucket get ThrottlingException.
	RunTaskRate  float64
	RunTaskBurst int
}

// Server is the stand-in. It implements http.Handler.
type Server struct {
	opts     Options
	throttle *rate.Limiter // nil: RunTask is not throttled

	mu       sync.Mutex
	clusters map[string]bool
	taskDefs map[string][]*taskDefinition // by family, revision 1 first
	tdTags   map[string][]tag             // by task definition ARN
	tasks    map[string]*liveTask         // by ARN
	order    []string                     // task ARNs, oldest first
	tokens   map[string][]string          // RunTask client token → task ARNs
	faults   Faults
	calls    map[string]int
	runTimes []time.Time // accepted RunTask calls
	ips      ipPool
	wg       sync.WaitGroup // task goroutines
	closed   bool
}

// Faults are injected failures, each counting down as it fires.
type Faults struct {
	// Capacity: the next n RunTask calls place no task and answer a
	// failure, as ECS does when Fargate has no capacity.
	Capacity int `json:"capacity,omitempty"`
	// StopBeforeRunning: the next n tasks stop in PENDING with StopReason.
	StopBeforeRunning int    `json:"stop_before_running,omitempty"`
	StopReason        string `json:"stop_reason,omitempty"`
	// Throttle: the next n calls of ThrottleOp (every operation when
	// empty) answer ThrottlingException.
	Throttle   int    `json:"throttle,omitempty"`
	ThrottleOp string `json:"throttle_op,omitempty"`
	// LoseRunTaskReply: the next n RunTask calls start their task but
	// answer ServerException, as when a reply is lost; the client's retry
	// with the same client token gets that task back.
	LoseRunTaskReply int `json:"lose_run_task_reply,omitempty"`
}

// CapacityReason is the failure reason of an injected capacity fault, as
// Fargate words it.
const CapacityReason = "Capacity is unavailable at this time. Please try again later or in a different availability zone"

// DefaultStopReason is the reason of an injected stop before RUNNING.
const DefaultStopReason = "CannotPullContainerError: pull image manifest has been retried 5 time(s): failed to resolve ref: not found (injected by the stand-in)"

// New returns a stand-in with opts.
func New(opts Options) *Server {
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.Account == "" {
		opts.Account = "000000000000"
	}
	if opts.Provisioning == 0 {
		opts.Provisioning = 5 * time.Millisecond
	}
	if opts.Pending == 0 {
		opts.Pending = 5 * time.Millisecond
	}
	if opts.StopGrace == 0 {
		opts.StopGrace = 2 * time.Second
	}
	s := &Server{opts: opts, clusters: map[string]bool{"default": true}, taskDefs: map[string][]*taskDefinition{},
		tdTags: map[string][]tag{}, tasks: map[string]*liveTask{}, tokens: map[string][]string{}, calls: map[string]int{},
		ips: newIPPool()}
	for _, c := range opts.Clusters {
		s.clusters[c] = true
	}
	if opts.RunTaskRate > 0 {
		s.throttle = rate.NewLimiter(rate.Limit(opts.RunTaskRate), max(opts.RunTaskBurst, 1))
	}
	return s
}

// Inject adds faults to those pending.
func (s *Server) Inject(f Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.Capacity += f.Capacity
	s.faults.StopBeforeRunning += f.StopBeforeRunning
	if f.StopReason != "" {
		s.faults.StopReason = f.StopReason
	}
	s.faults.Throttle += f.Throttle
	if f.Throttle > 0 {
		s.faults.ThrottleOp = f.ThrottleOp
	}
	s.faults.LoseRunTaskReply += f.LoseRunTaskReply
}

// Calls returns how many times each operation was called.
func (s *Server) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.calls))
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

// RunTaskTimes returns when each accepted (not throttled) RunTask arrived.
func (s *Server) RunTaskTimes() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.runTimes...)
}

// TaskStatus is a task as Tasks reports it.
type TaskStatus struct {
	ARN           string `json:"arn"`
	LastStatus    string `json:"last_status"`
	DesiredStatus string `json:"desired_status"`
	StoppedReason string `json:"stopped_reason,omitempty"`
	IP            string `json:"ip,omitempty"`
}

// Tasks lists every task, oldest first.
func (s *Server) Tasks() []TaskStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]TaskStatus, 0, len(s.order))
	for _, arn := range s.order {
		t := s.tasks[arn]
		out = append(out, TaskStatus{ARN: arn, LastStatus: t.t.LastStatus, DesiredStatus: t.t.DesiredStatus,
			StoppedReason: t.t.StoppedReason, IP: t.ip.String()})
	}
	return out
}

// Live lists the tasks not yet STOPPED.
func (s *Server) Live() []TaskStatus {
	var out []TaskStatus
	for _, t := range s.Tasks() {
		if t.LastStatus != "STOPPED" {
			out = append(out, t)
		}
	}
	return out
}

// Close stops every task still running and waits for them, then closes
// the runner.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	for _, t := range s.tasks {
		t.requestStop("stand-in closed", "ServiceSchedulerInitiated")
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("stand-in: tasks still stopping: %w", ctx.Err())
	}
	if s.opts.Runner != nil {
		return s.opts.Runner.Close(ctx)
	}
	return nil
}

// ServeHTTP answers one ECS API call, or the stand-in's own endpoints
// under /_standin/ (faults to inject, tasks to inspect).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/_standin/") {
		s.control(w, r)
		return
	}
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), targetPrefix)
	if r.Method != http.MethodPost || !ok {
		writeError(w, &apiError{http.StatusBadRequest, "UnknownOperationException", "expected POST with X-Amz-Target " + targetPrefix + "<Operation>"})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		writeError(w, &apiError{http.StatusBadRequest, "SerializationException", err.Error()})
		return
	}
	s.mu.Lock()
	s.calls[op]++
	if s.faults.Throttle > 0 && (s.faults.ThrottleOp == "" || s.faults.ThrottleOp == op) {
		s.faults.Throttle--
		s.mu.Unlock()
		writeError(w, errThrottled)
		return
	}
	s.mu.Unlock()
	handler, ok := s.ops()[op]
	if !ok {
		writeError(w, &apiError{http.StatusBadRequest, "UnknownOperationException", "the stand-in does not implement " + op})
		return
	}
	out, err := handler(r.Context(), body)
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = &apiError{http.StatusInternalServerError, "ServerException", err.Error()}
		}
		writeError(w, ae)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Requestid", newID())
	_ = json.NewEncoder(w).Encode(out)
}

func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Requestid", newID())
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": e.code, "message": e.msg})
}

// control serves POST /_standin/faults (a Faults document to inject) and
// GET /_standin/tasks (every task's status), for the stand-in command.
func (s *Server) control(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/_standin/faults" && r.Method == http.MethodPost:
		var f Faults
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			http.Error(w, "faults: "+err.Error(), http.StatusBadRequest)
			return
		}
		s.Inject(f)
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/_standin/tasks" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Tasks())
	default:
		http.NotFound(w, r)
	}
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ipPool hands out loopback addresses, one per task, from a /16 of
// 127.0.0.0/8 picked at random so stand-ins in parallel tests rarely
// share addresses (and a taken one is skipped).
type ipPool struct {
	base  [2]byte
	next  int
	inUse map[netip.Addr]bool
}

func newIPPool() ipPool {
	return ipPool{base: [2]byte{byte(64 + mrand.IntN(128)), byte(mrand.IntN(256))}, inUse: map[netip.Addr]bool{}}
}

// take returns a free address on which every port can be bound.
func (p *ipPool) take(ports []int) (netip.Addr, error) {
	for range 1 << 14 {
		p.next = p.next%(1<<14) + 1
		ip := netip.AddrFrom4([4]byte{127, p.base[0], p.base[1] + byte(p.next/250), byte(1 + p.next%250)})
		if p.inUse[ip] || !bindable(ip, ports) {
			continue
		}
		p.inUse[ip] = true
		return ip, nil
	}
	return netip.Addr{}, errors.New("no free loopback address left")
}

func (p *ipPool) release(ip netip.Addr) { delete(p.inUse, ip) }

func bindable(ip netip.Addr, ports []int) bool {
	for _, port := range ports {
		ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, uint16(port)).String())
		if err != nil {
			return false
		}
		_ = ln.Close()
	}
	return true
}

// sortedKeys lists m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
