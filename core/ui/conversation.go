package ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentenv/agentenv/core/transcript"
)

// What an episode's page shows: each reply, message and call's arguments
// up to pageFieldBytes, the conversation up to pageTextBytes; the rest is
// in the record's download. The page then stays a few MiB of HTML (text
// of '<' escapes four times over) whatever the episode held.
const (
	pageFieldBytes = 32 << 10
	pageTextBytes  = 1 << 20
)

// conversation is the episode as `agentenv transcripts show` prints it,
// so the page and the command read alike, with long texts cut (cut says
// whether any was).
func conversation(r *transcript.Record) (text string, cut bool) {
	short, cut := forPage(r)
	b := &cappedBuilder{max: pageTextBytes}
	err := transcript.WriteText(b, short)
	switch {
	case errors.Is(err, errPageFull):
		b.b.WriteString(fmt.Sprintf("\n… the page shows the first %d KiB of this conversation; the full record has the rest", pageTextBytes>>10))
		cut = true
	case err != nil:
		b.b.WriteString("\n(the conversation could not be printed whole: " + err.Error() + ")")
	}
	return b.b.String(), cut
}

// forPage is a copy of r whose long texts are cut for the page (records
// are shared: never change r).
func forPage(r *transcript.Record) (*transcript.Record, bool) {
	cut := false
	field := func(s string) string {
		if len(s) <= pageFieldBytes {
			return s
		}
		cut = true
		n := pageFieldBytes
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		return fmt.Sprintf("%s\n… %d more bytes not shown (the full record has them)", s[:n], len(s)-n)
	}
	out := *r
	out.Prompt = make([]transcript.Message, len(r.Prompt))
	for i, m := range r.Prompt {
		out.Prompt[i] = transcript.Message{Role: m.Role, Content: field(m.Content)}
	}
	out.Turns = make([]transcript.Turn, len(r.Turns))
	for i, t := range r.Turns {
		t.Reply = field(t.Reply)
		t.Messages = make([]transcript.Message, len(r.Turns[i].Messages))
		for j, m := range r.Turns[i].Messages {
			t.Messages[j] = transcript.Message{Role: m.Role, Content: field(m.Content)}
		}
		t.Calls = make([]transcript.Call, len(r.Turns[i].Calls))
		for j, c := range r.Turns[i].Calls {
			args := c.Arguments
			if len(args) > pageFieldBytes {
				cut = true
				args, _ = json.Marshal(fmt.Sprintf("%d bytes of arguments not shown (the full record has them)", len(args)))
			}
			t.Calls[j] = transcript.Call{Name: c.Name, Arguments: args}
		}
		out.Turns[i] = t
	}
	return &out, cut
}

var errPageFull = errors.New("the page's text is full")

// cappedBuilder keeps at most max bytes, then fails every write.
type cappedBuilder struct {
	b   strings.Builder
	max int
}

func (c *cappedBuilder) Write(p []byte) (int, error) {
	room := c.max - c.b.Len()
	if len(p) <= room {
		return c.b.Write(p)
	}
	for room > 0 && !utf8.RuneStart(p[room]) {
		room--
	}
	c.b.Write(p[:max(room, 0)])
	return max(room, 0), errPageFull
}
