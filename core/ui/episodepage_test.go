package ui

import (
	"bytes"
	"encoding/json"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/transcript"
)

// An episode's page cuts long replies and results and bounds the
// conversation it shows, pointing at the record's download, which has it
// all: a 90 MB episode made 90 MiB of HTML and 544 MiB a request.
func TestEpisodePageIsBounded(t *testing.T) {
	rec := record("ep-big", 1, time.Now())
	long := strings.Repeat("<", 2<<20) // escapes to 8 MiB of HTML
	for i := range 24 {
		rec.Turns = append(rec.Turns, transcript.Turn{Reply: long[:1<<20] + "end of reply",
			Messages: []transcript.Message{{Role: "tool", Content: strings.Repeat("r", 1<<20)}},
			Calls:    []transcript.Call{{Name: "f", Arguments: json.RawMessage(`{"s":"` + strings.Repeat("a", 1<<20) + `"}`)}}})
		_ = i
	}
	rec.Turns[0].Reply = long
	p, _ := newTestPage(t, rec)
	var resp *http.Response
	var body string
	n := allocated(func() { resp, body = serveGet(t, p, "/ui/episodes/ep-big") })
	t.Logf("a %d MiB record: a page of %d KiB, %d MiB allocated", rec.Size()>>20, len(body)>>10, n>>20)
	checkSafe(t, "big episode", resp, body, true)
	if len(body) > 8<<20 || n > 64<<20 {
		t.Errorf("the page of a %d MiB record is %d KiB and allocated %d MiB, want a bounded page", rec.Size()>>20, len(body)>>10, n>>20)
	}
	for _, want := range []string{"more bytes not shown", `href="/ui/episodes/ep-big/record.json"`, "Download the full record"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}

	resp, body = serveGet(t, p, "/ui/episodes/ep-big/record.json")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") ||
		resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("download: %d, %v", resp.StatusCode, resp.Header)
	}
	var whole bytes.Buffer
	enc := json.NewEncoder(&whole)
	enc.SetEscapeHTML(false)
	enc.Encode(rec)
	if body != whole.String() {
		t.Errorf("the download is %d bytes, not the record's line (%d bytes)", len(body), whole.Len())
	}
	if resp, _ := serveGet(t, p, "/ui/episodes/nope/record.json"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the download of an unknown episode: %d", resp.StatusCode)
	}
}

func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
