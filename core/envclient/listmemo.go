package envclient

import (
	"encoding/json"
	"fmt"
	"sync"
)

// listed remembers the tools of the listing pages read lately, by the
// page's text: an env lists the same text deploy after deploy, and reading
// it (the page decoded, every schema decoded and encoded again so its text
// is the SDK's) was a twentieth of serve's CPU per fresh rollout.
var listed = listMemo{pages: map[string]listedPage{}}

// listMemoMax bounds the pages remembered (about the kinds of env a
// server runs at once); past it the memo starts afresh. A page over
// listMemoPage bytes is read every time.
const (
	listMemoMax  = 64
	listMemoPage = 64 << 10
)

type listMemo struct {
	mu    sync.Mutex
	pages map[string]listedPage
}

type listedPage struct {
	tools []Tool
	next  string
}

// page returns the tools of a tools/list result and its next cursor. The
// tools' Parameters are shared with later listings of the same text:
// callers only read them.
func (m *listMemo) page(raw json.RawMessage) ([]Tool, string, error) {
	m.mu.Lock()
	p, ok := m.pages[string(raw)]
	m.mu.Unlock()
	if ok {
		return append([]Tool(nil), p.tools...), p.next, nil
	}
	p, err := readPage(raw)
	if err != nil {
		return nil, "", err
	}
	if len(raw) > listMemoPage {
		return p.tools, p.next, nil
	}
	m.mu.Lock()
	if len(m.pages) >= listMemoMax {
		clear(m.pages)
	}
	m.pages[string(raw)] = p
	m.mu.Unlock()
	return append([]Tool(nil), p.tools...), p.next, nil
}

// readPage reads a tools/list result: each schema decoded and encoded
// again, as the SDK's listing gives it (keys sorted), so the tools the
// model sees do not depend on the path.
func readPage(raw json.RawMessage) (listedPage, error) {
	var res listPage
	if err := json.Unmarshal(raw, &res); err != nil {
		return listedPage{}, fmt.Errorf("calling %q: reading the result: %w", "tools/list", err)
	}
	out := listedPage{next: res.NextCursor}
	for _, t := range res.Tools {
		if t == nil {
			continue // as the SDK drops a null entry
		}
		schema := json.RawMessage(`{"type":"object"}`)
		if len(t.InputSchema) > 0 && string(t.InputSchema) != "null" {
			var v any
			if err := json.Unmarshal(t.InputSchema, &v); err != nil {
				return listedPage{}, fmt.Errorf("tool %q: input schema: %w", t.Name, err)
			}
			var err error
			if schema, err = json.Marshal(v); err != nil {
				return listedPage{}, fmt.Errorf("tool %q: input schema: %w", t.Name, err)
			}
		}
		out.tools = append(out.tools, Tool{Name: t.Name, Description: t.Description, Parameters: schema})
	}
	return out, nil
}
