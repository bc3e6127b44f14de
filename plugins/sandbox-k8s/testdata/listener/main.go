// Command listener is the env of the Kubernetes sandbox's cluster tests: a
// TCP server on 0.0.0.0:$AGENTENV_PORT that answers HTTP with its sandbox
// id. LISTENER_ALLOC_MB=N first fills N MiB of memory (an env that exceeds
// its limit); LISTENER_EXIT=N exits N at once. `listener echo ARGS...`
// prints ARGS and the env's TOKEN variable and exits: what Exec runs in an
// image with no shell. `listener dial HOST:PORT` tries a TCP connection for
// two seconds and prints "connected", exiting 0, or the error, exiting 3
// when refused (what a NetworkPolicy's reject gives) and 1 otherwise (the
// NetworkPolicy tests).
package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "dial" {
		c, err := net.DialTimeout("tcp", os.Args[2], 2*time.Second)
		if errors.Is(err, syscall.ECONNREFUSED) {
			fmt.Println(err)
			os.Exit(3)
		}
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		c.Close()
		fmt.Println("connected")
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "echo" {
		fmt.Println(strings.Join(os.Args[2:], " "), "token="+os.Getenv("TOKEN"))
		if len(os.Args) > 2 && os.Args[2] == "fail" {
			fmt.Fprintln(os.Stderr, "failing as asked")
			os.Exit(3)
		}
		return
	}
	if mb, _ := strconv.Atoi(os.Getenv("LISTENER_ALLOC_MB")); mb > 0 {
		fmt.Println("listener: filling", mb, "MiB")
		hold := make([][]byte, 0, mb)
		for range mb {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = 1
			}
			hold = append(hold, b)
		}
		fmt.Println("listener: filled", len(hold), "MiB")
	}
	if code := os.Getenv("LISTENER_EXIT"); code != "" {
		n, _ := strconv.Atoi(code)
		fmt.Fprintln(os.Stderr, "listener: exiting", n, "as asked")
		os.Exit(n)
	}
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, os.Getenv("AGENTENV_SANDBOX_ID"))
	})
	if err := http.ListenAndServe("0.0.0.0:"+os.Getenv("AGENTENV_PORT"), nil); err != nil {
		fmt.Fprintln(os.Stderr, "listener:", err)
		os.Exit(1)
	}
}
