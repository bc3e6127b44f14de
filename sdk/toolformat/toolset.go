package toolformat

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// ToolSet is a turn's offered tools with an id derived from their content
// (names, descriptions, schemas, in order): the same tools always have the
// same id. A host makes one per turn (NewToolSet hashes the tools once) and
// parses every reply of the turn with it; over the wire the plugin is sent
// the tools once per process and each parse names them by id.
type ToolSet struct {
	id    string
	tools []Tool
}

// NewToolSet makes the tool set of tools; they must not change after.
func NewToolSet(tools []Tool) *ToolSet {
	if len(tools) == 0 {
		return &ToolSet{}
	}
	h := sha256.New()
	var n [8]byte
	field := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	for _, t := range tools {
		field([]byte(t.Name))
		field([]byte(t.Description))
		field(t.Parameters)
	}
	return &ToolSet{id: hex.EncodeToString(h.Sum(nil)[:16]), tools: tools}
}

// ID names the set; "" for no tools.
func (s *ToolSet) ID() string { return s.id }

// Tools are the set's tools, in the order offered.
func (s *ToolSet) Tools() []Tool { return s.tools }

// SetParser reads a reply against a tool set. The SDK's Client (the host
// side of a plugin) is one: it sends the plugin each set once.
type SetParser interface {
	ParseSet(ctx context.Context, text string, set *ToolSet) (Parsed, error)
}

// ParseWith parses text with p against set: through ParseSet where p has
// it, else through Parse with the set's tools.
func ParseWith(ctx context.Context, p Parser, text string, set *ToolSet) (Parsed, error) {
	if sp, ok := p.(SetParser); ok {
		return sp.ParseSet(ctx, text, set)
	}
	return p.Parse(ctx, text, set.Tools())
}
