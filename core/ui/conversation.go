package ui

import (
	"strings"

	"github.com/agentenv/agentenv/core/transcript"
)

// conversation is the episode as `agentenv transcripts show` prints it,
// so the page and the command read alike.
func conversation(r *transcript.Record) string {
	var b strings.Builder
	if err := transcript.WriteText(&b, r); err != nil {
		b.WriteString("\n(the conversation could not be printed whole: " + err.Error() + ")")
	}
	return b.String()
}
