package server

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/gorilla/websocket"
)

// A web page of another site cannot open /ws with the Basic credentials
// its browser holds for the server (it could drive episodes with them):
// a browser's upgrade from another Origin is refused 403 UNAUTHORIZED;
// trainers' clients (no Origin, or their own host's) and a same-site page
// behind a proxy are served.
func TestWSRefusesOtherSites(t *testing.T) {
	ts := startServer(t, Options{Token: testToken})
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("openenv:"+testToken))
	for _, tc := range []struct {
		name   string
		header map[string]string
		ok     bool
	}{
		{"a trainer (no Origin)", nil, true},
		{"a client that sends its own host", map[string]string{"Origin": "http://" + ts.addr}, true},
		{"a browser on the server's own page", map[string]string{"Origin": "http://" + ts.addr, "Sec-Fetch-Site": "same-origin"}, true},
		{"behind a proxy that rewrote Host", map[string]string{"Origin": "https://envs.example.com", "X-Forwarded-Host": "envs.example.com"}, true},
		{"another site", map[string]string{"Origin": "https://evil.example"}, false},
		{"another site, Sec-Fetch-Site", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, false},
		{"a sibling subdomain", map[string]string{"Origin": "https://other.example.com", "Sec-Fetch-Site": "same-site"}, false},
		{"a sandboxed frame", map[string]string{"Origin": "null"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{"Authorization": {basic}}
			for k, v := range tc.header {
				h.Set(k, v)
			}
			conn, resp, err := websocket.DefaultDialer.Dial("ws://"+ts.addr+"/ws", h)
			if tc.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				conn.Close()
				return
			}
			if err == nil {
				conn.Close()
				t.Fatal("upgraded")
			}
			if resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Fatalf("%v %v, want 403", resp, err)
			}
			b, _ := io.ReadAll(resp.Body)
			var body struct{ Code, Message string }
			if json.Unmarshal(b, &body) != nil || body.Code != CodeUnauthorized {
				t.Errorf("body %s, want code %s", b, CodeUnauthorized)
			}
		})
	}
}
