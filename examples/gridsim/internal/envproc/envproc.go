// Package envproc builds GridSim's env binary and runs it as a real process
// on a loopback port, for tests and for playing without the episode engine.
package envproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Package is the env's main package.
const Package = "github.com/agentenv/agentenv/examples/gridsim/envs/gridsim"

// Build compiles the env statically into dir/gridsim-env, as the bundle's
// build step does, and returns the binary's path.
func Build(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "gridsim-env")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, Package)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", Package, err, out.String())
	}
	return bin, nil
}

// Proc is a running env process.
type Proc struct {
	URL string // the MCP endpoint, http://127.0.0.1:PORT/mcp

	cmd    *exec.Cmd
	stderr *lockedBuffer
	exited chan struct{}
	err    error
}

// Start runs bin on a free loopback port and waits until it answers an
// MCP initialize, or until ctx ends.
func Start(ctx context.Context, bin string) (*Proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &Proc{
		URL:    fmt.Sprintf("http://127.0.0.1:%d/mcp", port),
		cmd:    exec.Command(bin),
		stderr: &lockedBuffer{},
		exited: make(chan struct{}),
	}
	p.cmd.Env = append(os.Environ(), "AGENTENV_PORT="+strconv.Itoa(port))
	p.cmd.Stderr = p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()

	for {
		cs, err := p.Connect(ctx)
		if err == nil {
			_ = cs.Close()
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("env exited before it was ready (%v): %s", p.err, p.stderr.String())
		case <-ctx.Done():
			p.Stop()
			return nil, fmt.Errorf("env not ready at %s: %w (last error: %v)", p.URL, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Connect opens an MCP client session to the env.
func (p *Proc) Connect(ctx context.Context) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "gridsim-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.URL, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", p.URL, err)
	}
	return cs, nil
}

// Stop sends SIGTERM to the env's process group, then SIGKILL after two
// seconds, and waits for it to exit.
func (p *Proc) Stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(2 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// Pid is the env's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Stderr is what the env logged so far.
func (p *Proc) Stderr() string { return p.stderr.String() }

// Exited reports whether the process has exited, and its error.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.exited:
		return true, p.err
	default:
		return false, nil
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("finding a free port: not a TCP address")
	}
	return addr.Port, nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
