// Package toolformat is the plugin-author API for tool-call formats: they
// read the tool calls out of a model's reply text.
package toolformat

import (
	"context"
	"encoding/json"

	"github.com/agentenv/agentenv/sdk"
)

// Tool is a tool the model was offered.
type Tool struct {
	Name        string
	Description string
	// Parameters is the tool's JSON Schema for its arguments object.
	Parameters json.RawMessage
}

// Call is one tool call read from a reply.
type Call struct {
	Name string
	// Arguments is always a JSON object.
	Arguments json.RawMessage
}

// Unparsed is text that opens a tool call but cannot be read as one.
type Unparsed struct {
	Text string // the call's raw text as the model wrote it
	// Reason is written for the model: what is wrong and where, so it can
	// retry (e.g. "invalid JSON at offset 41: ...").
	Reason string
}

// Parsed is what a format reads from a reply.
type Parsed struct {
	Content  string // the reply's text outside tool calls
	Calls    []Call
	Unparsed []Unparsed

	// Set by the SDK, not by plugins: what the plugin read but did not
	// send the host. At most MaxUnparsedSent Unparsed entries are sent;
	// calls are dropped from the end when together they would overflow
	// the message limit.
	UnparsedOmitted int
	CallsOmitted    int
}

// Parser reads a reply. It is pure: the same input always gives the same
// output, and it keeps no state between calls. An error means the parser
// itself failed, never that the reply was malformed (that is Unparsed).
type Parser interface {
	Parse(ctx context.Context, text string, tools []Tool) (Parsed, error)
}

// Plugin is what a tool-format plugin binary serves.
type Plugin interface {
	sdk.Informer
	Parser
}

// MaxUnparsedSent is how many Unparsed entries of one reply the SDK sends
// the host; their Text and Reason are cut to about 1 KiB each.
const MaxUnparsedSent = 64
