package main

// This binary is also run as three small helpers, by the plugin and inside
// sandboxes. None of them is part of the plugin protocol.
//
//	keep   the keeper: one per sandbox, in a session of its own, the parent
//	       of bwrap (so bwrap's --die-with-parent ties the sandbox to it,
//	       not to the plugin process, which a hot swap or a crash replaces).
//	       With the network off it also listens on the sandbox's host port
//	       and relays each connection to the relay inside.
//	relay  runs inside a sandbox without network: starts the env, and
//	       connects the keeper's connections to the env's port there.
//	limit  sets resource limits, then executes bwrap.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// helpers are the modes of this binary besides the plugin, by first argument.
var helpers = map[string]func(args []string) int{
	"keep":  runKeeper,
	"relay": runRelay,
	"limit": runLimit,
}

// ready is the byte the relay answers once it has connected to the env, so
// the keeper and Deploy tell a listening env from one not up yet.
const ready = 1

// runKeeper: keep --info FILE [--listen ADDR --relay SOCK] -- COMMAND...
// It starts COMMAND (bwrap, possibly through limit) with bwrap's info on
// fd 3 written to FILE, and exits with its status.
func runKeeper(args []string) int {
	fs := flag.NewFlagSet("keep", flag.ContinueOnError)
	info := fs.String("info", "", "file for bwrap's --info-fd 3")
	listen := fs.String("listen", "", "host address to relay to the sandbox (network off)")
	relay := fs.String("relay", "", "the relay's unix socket (network off)")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 || *info == "" || (*listen == "") != (*relay == "") {
		fmt.Fprintln(os.Stderr, "usage: keep --info FILE [--listen ADDR --relay SOCK] -- COMMAND...")
		return 2
	}
	// Signals are noted, not ignored: an ignored signal stays ignored in
	// the programs started, and the env must get its SIGTERM. The plugin
	// stops a sandbox by signalling its processes, then killing this one.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	var ln net.Listener
	if *listen != "" {
		var err error
		if ln, err = net.Listen("tcp", *listen); err != nil {
			fmt.Fprintf(os.Stderr, "agentenv-sandbox-bwrap keeper: %v\n", err)
			return 3
		}
	}
	infoFile, err := os.OpenFile(*info, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agentenv-sandbox-bwrap keeper: %v\n", err)
		return 3
	}
	// bwrap's --die-with-parent fires when the thread that started it
	// ends, not the process: keep this goroutine on its thread for good.
	runtime.LockOSThread()
	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{infoFile}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "agentenv-sandbox-bwrap keeper: starting %s: %v\n", fs.Arg(0), err)
		return 3
	}
	infoFile.Close()
	if ln != nil {
		// A connection made before the env listens is closed at once, as
		// a closed port would refuse it.
		go forward(ln, func() (net.Conn, error) { return dialRelay(*relay, 5*time.Second) }, false)
	}
	return exitStatus(cmd.Wait())
}

// exitStatus is the status a helper exits with when its child ended with
// err: the child's own, or 128+N for a child killed by signal N.
func exitStatus(err error) int {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return exit.ExitCode()
	}
	fmt.Fprintf(os.Stderr, "agentenv-sandbox-bwrap: %v\n", err)
	return 3
}

// forward connects each connection ln accepts with one dial makes, after
// sending the ready byte when greet is set; a failed dial closes it.
func forward(ln net.Listener, dial func() (net.Conn, error), greet bool) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			to, err := dial()
			if err != nil {
				return
			}
			defer to.Close()
			if greet {
				if _, err := c.Write([]byte{ready}); err != nil {
					return
				}
			}
			splice(c, to)
		}()
	}
}

// dialRelay connects to the relay and waits for its ready byte.
func dialRelay(sock string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("unix", sock, timeout)
	if err != nil {
		return nil, err
	}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil || b[0] != ready {
		c.Close()
		return nil, fmt.Errorf("the env is not listening yet: %v", err)
	}
	_ = c.SetReadDeadline(time.Time{})
	return c, nil
}

// splice copies both ways until both sides are done, passing on each
// side's end of writing.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(a, b)
	go pipe(b, a)
	<-done
	<-done
}

// runRelay: relay --sock PATH --port N -- COMMAND...
// Inside a sandbox without network: starts COMMAND (the env), serves the
// socket, and exits with the env's status.
func runRelay(args []string) int {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	sock := fs.String("sock", "", "unix socket to serve")
	port := fs.Int("port", 0, "the env's port inside the sandbox")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 || *sock == "" || *port <= 0 {
		fmt.Fprintln(os.Stderr, "usage: relay --sock PATH --port N -- COMMAND...")
		return 2
	}
	// The env gets its own SIGTERM (the plugin signals every process of
	// the sandbox); the relay stays until the env has gone.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	_ = os.Remove(*sock)
	ln, err := net.Listen("unix", *sock)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agentenv-sandbox-bwrap relay: %v\n", err)
		return 3
	}
	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "agentenv-sandbox-bwrap relay: starting the env: %v\n", err)
		return 127
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(*port))
	go forward(ln, func() (net.Conn, error) { return net.DialTimeout("tcp", addr, 5*time.Second) }, true)
	return exitStatus(cmd.Wait())
}

// runLimit: limit [--nofile N] [--fsize BYTES] [--cpu SECONDS] [--as BYTES]
// [--nproc N] -- PROGRAM ARGS...
// Sets the limits (soft and hard), then becomes PROGRAM, so they hold for
// PROGRAM and everything it starts.
func runLimit(args []string) int {
	fs := flag.NewFlagSet("limit", flag.ContinueOnError)
	resources := []struct {
		name string
		res  int
		v    *uint64
	}{
		{"nofile", syscall.RLIMIT_NOFILE, nil},
		{"fsize", syscall.RLIMIT_FSIZE, nil},
		{"cpu", syscall.RLIMIT_CPU, nil},
		{"as", syscall.RLIMIT_AS, nil},
		{"nproc", unix.RLIMIT_NPROC, nil},
	}
	for i := range resources {
		resources[i].v = fs.Uint64(resources[i].name, 0, "limit (0: unchanged)")
	}
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: limit [--nofile N] [--fsize B] [--cpu S] [--as B] [--nproc N] -- PROGRAM ARGS...")
		return 2
	}
	for _, r := range resources {
		if *r.v == 0 {
			continue
		}
		if err := syscall.Setrlimit(r.res, &syscall.Rlimit{Cur: *r.v, Max: *r.v}); err != nil {
			fmt.Fprintf(os.Stderr, "agentenv-sandbox-bwrap limit: setting %s to %d: %v\n", r.name, *r.v, err)
			return 3
		}
	}
	prog, err := exec.LookPath(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(os.Stderr, "agentenv-sandbox-bwrap limit: %v\n", err)
		return 127
	}
	err = syscall.Exec(prog, fs.Args(), os.Environ())
	fmt.Fprintf(os.Stderr, "agentenv-sandbox-bwrap limit: exec %s: %v\n", prog, err)
	return 127
}
