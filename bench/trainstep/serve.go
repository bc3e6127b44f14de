package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentenv/agentenv/client"
)

func numCPU() int { return runtime.NumCPU() }

// buildAgentenv builds the agentenv binary of this checkout into dir.
func buildAgentenv(dir string) (string, error) {
	out := filepath.Join(dir, "agentenv")
	cmd := exec.Command("go", "build", "-o", out, "github.com/agentenv/agentenv/cmd/agentenv")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/agentenv: %w\n%s", err, msg)
	}
	return out, nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// server is an `agentenv serve` this run started.
type server struct {
	cmd  *exec.Cmd
	url  string
	log  *bytes.Buffer
	done chan struct{}
}

// startServe serves o.bundle with args added, and waits until it is healthy.
func startServe(ctx context.Context, o options, env []string, args ...string) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	all := append([]string{"serve", o.bundle, "--addr", addr, "--log-level", "warn", "--idle-timeout", "0"}, args...)
	cmd := exec.Command(o.agentenv, all...)
	cmd.Env = append(os.Environ(), env...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, url: "http://" + addr, log: &log, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	hctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	// A server that exits at start (a bad flag, a plugin that fails to
	// configure) ends the wait at once, its log in the error.
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-hctx.Done():
		}
	}()
	c, err := client.New(s.url, client.Options{})
	if err != nil {
		s.stop()
		return nil, err
	}
	if err := c.Health(hctx); err != nil {
		s.stop()
		if s.cmd.ProcessState != nil {
			err = fmt.Errorf("it exited (%s)", s.cmd.ProcessState)
		}
		return nil, fmt.Errorf("agentenv serve never became healthy: %w\n%s", err, log.String())
	}
	return s, nil
}

// stop drains the server (SIGTERM) and waits for it.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(2 * time.Minute):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// usage is the server's CPU time and resident memory: agentenv serve and
// its plugin processes (agentenv plugin-serve ...); the envs the process
// sandbox starts are the task's, not the server's.
type usage struct {
	cpu time.Duration
	rss int64
}

// cpuByProcess is the CPU time of serve and of each plugin process, by
// name ("serve", "sandbox-local", "toolformat-hermes", ...).
func (s *server) cpuByProcess() map[string]time.Duration {
	out := map[string]time.Duration{}
	c, _ := procStat(s.cmd.Process.Pid)
	out["serve"] = c
	for _, pid := range pluginChildren(s.cmd.Process.Pid) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		name := "plugin"
		for i, a := range args {
			if a == "plugin-serve" && i+1 < len(args) {
				name = args[i+1]
			}
		}
		c, _ := procStat(pid)
		out[name] += c
	}
	return out
}

func (s *server) usage() usage {
	pids := append([]int{s.cmd.Process.Pid}, pluginChildren(s.cmd.Process.Pid)...)
	var u usage
	for _, pid := range pids {
		c, r := procStat(pid)
		u.cpu += c
		u.rss += r
	}
	return u
}

// pluginChildren are pid's child processes running `plugin-serve`.
func pluginChildren(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid(child) != pid {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child))
		if bytes.Contains(cmdline, []byte("plugin-serve")) {
			out = append(out, child)
		}
	}
	return out
}

func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 2 {
		return -1
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

// procStat is a process's CPU time (user + system) and RSS, from /proc.
func procStat(pid int) (time.Duration, int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	// After the command: state is field 3 of stat, utime 14, stime 15.
	var cpu time.Duration
	if len(f) > 13 {
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		cpu = time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
	}
	var rss int64
	if st, err := os.Open(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		sc := bufio.NewScanner(st)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				rss = kb << 10
			}
		}
		st.Close()
	}
	return cpu, rss
}
