// Command listener is the env of the ECS sandbox's Docker tests: an HTTP
// server on 0.0.0.0:$AGENTENV_PORT that answers with its sandbox id, or,
// with LISTENER_EXIT=N set, a process that exits N at once.
package main

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
)

func main() {
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
