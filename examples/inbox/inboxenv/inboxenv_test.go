package inboxenv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentenv/agentenv/examples/inbox/inboxenv"
	"github.com/agentenv/agentenv/examples/inbox/mailbox"
)

// connect serves box over streamable HTTP, as the env binary does, and
// connects an MCP client to it.
func connect(t *testing.T, box *mailbox.Mailbox) *mcp.ClientSession {
	t.Helper()
	srv := httptest.NewServer(inboxenv.New(box, nil).Handler())
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "inboxenv-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: %v", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

func committed(t *testing.T) *mailbox.Mailbox {
	t.Helper()
	box, err := mailbox.Committed()
	if err != nil {
		t.Fatal(err)
	}
	return box
}

// The three tools, with the schemas the engine offers the model and the
// qwen3_coder format types the values by.
func TestToolsListed(t *testing.T) {
	cs := connect(t, committed(t))
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	type schema struct {
		Type       string
		Properties map[string]struct{ Type string }
		Required   []string
	}
	got := map[string]schema{}
	for _, tool := range res.Tools {
		b, _ := json.Marshal(tool.InputSchema)
		var s schema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s schema %s: %v", tool.Name, b, err)
		}
		got[tool.Name] = s
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
	}
	// Each tool's one parameter, if any, is a required string.
	want := map[string]string{inboxenv.ToolSearch: "query", inboxenv.ToolRead: "id", inboxenv.ToolFolders: ""}
	if len(got) != len(want) {
		t.Fatalf("tools = %v, want %v", got, want)
	}
	for name, param := range want {
		s, ok := got[name]
		if !ok || s.Type != "object" {
			t.Fatalf("%s: schema %+v", name, s)
		}
		if param == "" {
			if len(s.Properties) != 0 || len(s.Required) != 0 {
				t.Errorf("%s takes no arguments, schema %+v", name, s)
			}
			continue
		}
		if len(s.Properties) != 1 || s.Properties[param].Type != "string" || !slices.Equal(s.Required, []string{param}) {
			t.Errorf("%s: schema %+v, want one required string %s", name, s, param)
		}
	}
}

func TestSearchEmails(t *testing.T) {
	box := committed(t)
	cs := connect(t, box)

	// The page's excerpt: the October invoice from Acme, by id, sender and
	// subject, as a JSON array.
	text, isErr := call(t, cs, inboxenv.ToolSearch, map[string]any{"query": "acme invoice october"})
	var hits []mailbox.Hit
	if err := json.Unmarshal([]byte(text), &hits); isErr || err != nil || len(hits) != 1 {
		t.Fatalf("search answered %q (error %v): %v", text, isErr, err)
	}
	if h := hits[0]; h.From != "billing@acme-supplies.example" || h.Subject != "Invoice INV-1042 for October" || h.Folder != "inbox" {
		t.Fatalf("hit = %+v", h)
	}

	// More matches than the limit: the newest ten, and a line saying so.
	_, total, _ := box.Search("invoice", 1000)
	text, isErr = call(t, cs, inboxenv.ToolSearch, map[string]any{"query": "invoice"})
	head, more, found := strings.Cut(text, "\n")
	if isErr || !found || more != fmt.Sprintf("(10 of %d matching emails shown, newest first; add words to narrow the search.)", total) {
		t.Fatalf("search for invoice answered %q", text)
	}
	if err := json.Unmarshal([]byte(head), &hits); err != nil || len(hits) != inboxenv.SearchLimit || hits[0].Date < hits[9].Date {
		t.Fatalf("hits %q: %v", head, err)
	}

	text, isErr = call(t, cs, inboxenv.ToolSearch, map[string]any{"query": "zebra invoice"})
	if isErr || text != `No email holds every word of "zebra invoice". Try fewer or other words.` {
		t.Fatalf("no match: %q (error %v)", text, isErr)
	}
	text, isErr = call(t, cs, inboxenv.ToolSearch, map[string]any{"query": " ? "})
	if !isErr || !strings.Contains(text, "the query has no words") {
		t.Fatalf("empty query: %q (error %v)", text, isErr)
	}
	// The SDK checks arguments against the schema before the tool runs.
	text, isErr = call(t, cs, inboxenv.ToolSearch, map[string]any{"q": "invoice"})
	if !isErr || !strings.Contains(text, `additional properties ["q"]`) {
		t.Fatalf("missing query: %q (error %v)", text, isErr)
	}
}

func TestReadEmail(t *testing.T) {
	box := committed(t)
	cs := connect(t, box)
	hits, _, _ := box.Search("refund 58213", 10)
	if len(hits) != 1 {
		t.Fatalf("hits %v", hits)
	}
	want, _ := box.Email(hits[0].ID)
	text, isErr := call(t, cs, inboxenv.ToolRead, map[string]any{"id": hits[0].ID})
	if isErr || text != want.Text() || !strings.Contains(text, "We have refunded $64.90 to your Visa card ending in 4417") {
		t.Fatalf("read_email answered %q (error %v)", text, isErr)
	}
	for _, id := range []string{"m-999", "", "58213"} {
		text, isErr = call(t, cs, inboxenv.ToolRead, map[string]any{"id": id})
		if !isErr || text != fmt.Sprintf("no email has id %q; ids look like m-12, as search_emails lists them", id) {
			t.Errorf("read_email(%q) answered %q (error %v)", id, text, isErr)
		}
	}
}

func TestListFolders(t *testing.T) {
	cs := connect(t, committed(t))
	text, isErr := call(t, cs, inboxenv.ToolFolders, map[string]any{})
	var got []mailbox.FolderCount
	if err := json.Unmarshal([]byte(text), &got); isErr || err != nil {
		t.Fatalf("list_folders answered %q: %v", text, err)
	}
	var names []string
	sum := 0
	for _, f := range got {
		names = append(names, f.Folder)
		sum += f.Emails
	}
	if !slices.Equal(names, mailbox.Folders) || sum != len(committed(t).Emails) || got[3] != (mailbox.FolderCount{Folder: "spam", Emails: 4}) {
		t.Fatalf("list_folders = %v", got)
	}
}
