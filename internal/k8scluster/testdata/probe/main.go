// Command probe is the harness tests' image: `probe serve` answers "ok" on
// :8080 over HTTP, `probe alloc MiB` touches that much memory then sleeps,
// `probe sleep` sleeps, `probe echo WORDS` prints them.
package main

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe serve|alloc MiB|sleep|echo WORDS")
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
	case "echo":
		fmt.Println(strings.Join(os.Args[2:], " "))
	}
}
