// Command terminalenv stands in for agentenv's terminal binary
// (cmd/agentenv-terminal) in the Docker-mode tests: built statically and
// bind-mounted into a task's container, it is run as the container's
// entrypoint, in the tests of terminals that misbehave (the real one,
// cmd/agentenv-terminal, serves the others). It answers HTTP on
// 0.0.0.0:$AGENTENV_PORT: /mcp says it is the terminal, /env prints
// $AGENTENV_WORKDIR and its working dir. TERMINALENV_FAIL=1 makes it exit 3
// before listening; TERMINALENV_SILENT=1 makes it start but never listen.
package main

import (
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if os.Getenv("TERMINALENV_FAIL") == "1" {
		fmt.Fprintln(os.Stderr, "terminalenv: failing to start as asked")
		os.Exit(3)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	if os.Getenv("TERMINALENV_SILENT") == "1" {
		<-sig
		return
	}
	go func() { <-sig; os.Exit(0) }()
	http.HandleFunc("/mcp", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "terminalenv") })
	http.HandleFunc("/env", func(w http.ResponseWriter, _ *http.Request) {
		wd, _ := os.Getwd()
		fmt.Fprintf(w, "workdir=%s\ncwd=%s\n", os.Getenv("AGENTENV_WORKDIR"), wd)
	})
	if err := http.ListenAndServe(":"+os.Getenv("AGENTENV_PORT"), nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
