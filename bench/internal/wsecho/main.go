// Command wsecho is a bare WebSocket echo server on gorilla/websocket, the
// floor the server benchmarks compare agentenv's sessions against: it
// upgrades, then echoes every frame, and nothing else.
package main

import (
	"flag"
	"log"
	"net/http"

	"github.com/gorilla/websocket"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	up := websocket.Upgrader{ReadBufferSize: 4096, WriteBufferSize: 4096}
	http.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			for {
				kind, b, err := c.ReadMessage()
				if err != nil {
					return
				}
				if err := c.WriteMessage(kind, b); err != nil {
					return
				}
			}
		}()
	})
	http.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })
	log.Fatal(http.ListenAndServe(*addr, nil))
}
