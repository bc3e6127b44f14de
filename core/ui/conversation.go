package ui

import (
	"strings"

	"github.com/agentenv/agentenv/core/transcript"
)

// conversation is the episode as a chat, one message after another.
// TODO(ui): print it with transcript's own text printer once it lands, so
// the page and `agentenv transcripts` show one conversation alike.
func conversation(r *transcript.Record) string {
	var b strings.Builder
	for _, m := range r.Conversation() {
		b.WriteString("[" + m.Role + "]\n" + m.Content + "\n\n")
	}
	return b.String()
}
