// Command dockerenv is the env of the Docker-mode tests: built statically
// into an image FROM scratch, it answers HTTP on 0.0.0.0:$AGENTENV_PORT
// (it need not speak MCP: readiness is the host's business) and doubles
// as the commands Exec runs, since a scratch image has no shell:
//
//	dockerenv getenv NAME   print $NAME
//	dockerenv write PATH    write PATH, printing "wrote" or the error
//	dockerenv exit N        print to both streams, exit N
//	dockerenv read PATH     print PATH's content
//	dockerenv sleep SECONDS sleep (a slow build step: RUN ["/dockerenv", "sleep", "5"])
//
// DOCKERENV_FAIL=1 makes it print a reason and exit 2 before listening.
package main

import (
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 2 {
		switch os.Args[1] {
		case "getenv":
			fmt.Println(os.Getenv(os.Args[2]))
			return
		case "write":
			if err := os.WriteFile(os.Args[2], []byte("x"), 0o644); err != nil {
				fmt.Println(err)
				return
			}
			fmt.Println("wrote")
			return
		case "read":
			data, err := os.ReadFile(os.Args[2])
			if err != nil {
				fmt.Println(err)
				os.Exit(1)
			}
			os.Stdout.Write(data)
			return
		case "sleep":
			n, _ := strconv.Atoi(os.Args[2])
			time.Sleep(time.Duration(n) * time.Second)
			return
		case "exit":
			n, _ := strconv.Atoi(os.Args[2])
			fmt.Println("to stdout")
			fmt.Fprintln(os.Stderr, "to stderr")
			os.Exit(n)
		}
	}
	if os.Getenv("DOCKERENV_FAIL") == "1" {
		fmt.Fprintln(os.Stderr, "dockerenv: failing to start as asked")
		os.Exit(2)
	}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		<-sig
		os.Exit(0)
	}()
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "dockerenv") })
	if err := http.ListenAndServe(":"+os.Getenv("AGENTENV_PORT"), nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
