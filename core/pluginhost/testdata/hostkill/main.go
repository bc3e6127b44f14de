// Command hostkill is a plugin host for the orphan test: it starts the
// reward plugin "v" found in the folder given as its argument, prints the
// plugin's pid and then waits to be killed.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/core/pluginhost"
)

func main() {
	h, err := pluginhost.New(pluginhost.Options{
		Logger:     hclog.New(&hclog.LoggerOptions{Output: os.Stderr, Level: hclog.Warn}),
		SearchPath: []string{os.Args[1]},
		Builtins:   []string{},
		CachePath:  "-",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	r, err := h.Reward(context.Background(), "v", nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pid, err := r.Combine(context.Background(), map[string]float64{"pid": 0})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("PID %d\n", int(pid))
	select {}
}
