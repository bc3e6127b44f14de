// Command probe is the harness tests' image: `probe serve` answers "ok" on
// :8080 over HTTP, `probe alloc MiB` touches that much memory then sleeps,
// `probe sleep` sleeps, `probe dial HOST:PORT` connects and says how it went
// (exit 0 connected, 3 refused, 1 any other failure), `probe lookup NAME...`
// resolves each name through the pod's resolv.conf and says to what,
// `probe echo WORDS` prints them.
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
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe serve|alloc MiB|sleep|dial HOST:PORT|lookup NAME...|echo WORDS")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
		if err := http.ListenAndServe(":8080", nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "alloc":
		mib, _ := strconv.Atoi(os.Args[2])
		var keep [][]byte
		for i := 0; i < mib; i++ {
			b := make([]byte, 1<<20)
			for j := range b {
				b[j] = byte(j)
			}
			keep = append(keep, b)
		}
		fmt.Println("allocated", len(keep), "MiB")
		time.Sleep(time.Hour)
	case "sleep":
		time.Sleep(time.Hour)
	case "dial":
		// The outcome goes to the termination message, which the test reads
		// from the pod's status.
		c, err := net.DialTimeout("tcp", os.Args[2], 5*time.Second)
		msg := "connected"
		if err != nil {
			msg = err.Error()
		} else {
			c.Close()
		}
		_ = os.WriteFile("/dev/termination-log", []byte(msg), 0o644)
		fmt.Println(msg)
		if errors.Is(err, syscall.ECONNREFUSED) {
			os.Exit(3) // refused: what a NetworkPolicy's reject gives
		}
		if err != nil {
			os.Exit(1)
		}
	case "lookup":
		// One line per name, "NAME ADDR[,ADDR]" or "NAME error: ...", in
		// the termination message; exit 1 if any failed.
		var lines []string
		failed := false
		for _, name := range os.Args[2:] {
			addrs, err := net.LookupHost(name)
			if err != nil {
				failed = true
				lines = append(lines, name+" error: "+err.Error())
				continue
			}
			lines = append(lines, name+" "+strings.Join(addrs, ","))
		}
		msg := strings.Join(lines, "\n")
		_ = os.WriteFile("/dev/termination-log", []byte(msg), 0o644)
		fmt.Println(msg)
		if failed {
			os.Exit(1)
		}
	case "echo":
		fmt.Println(strings.Join(os.Args[2:], " "))
	}
}
