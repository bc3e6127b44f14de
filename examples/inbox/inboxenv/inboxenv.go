// Package inboxenv is the inbox example's env: an MCP server over one
// mailbox, read-only, so every episode sees the same mail. Its tools:
//
//   - search_emails(query): the emails holding every word of the query,
//     newest first, as a JSON array of {id, folder, from, date, subject};
//     at most ten, with a line saying how many more matched.
//   - read_email(id): one email, headers then body.
//   - list_folders(): every folder and how many emails it holds, as JSON.
//
// The tasks score the model's answers with verify_answer, so the env has
// no grading tool.
package inboxenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentenv/agentenv/examples/inbox/mailbox"
)

// Tool names, and the server's.
const (
	ToolSearch  = "search_emails"
	ToolRead    = "read_email"
	ToolFolders = "list_folders"

	ServerName    = "inbox"
	ServerVersion = "1.0.0"
)

// SearchLimit is the most hits search_emails lists.
const SearchLimit = 10

// SearchArgs is search_emails's arguments.
type SearchArgs struct {
	Query string `json:"query" jsonschema:"words to look for, e.g. invoice acme; an email matches when it holds every word, in its sender, recipient, subject or body (case does not matter)"`
}

// ReadArgs is read_email's arguments.
type ReadArgs struct {
	ID string `json:"id" jsonschema:"the email's id as search_emails lists it, e.g. m-12"`
}

// Env serves one mailbox.
type Env struct {
	box *mailbox.Mailbox
	log hclog.Logger
}

// New returns an env serving box.
func New(box *mailbox.Mailbox, log hclog.Logger) *Env {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Env{box: box, log: log}
}

// Server returns an MCP server offering the env's tools.
func (e *Env) Server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: ServerName, Version: ServerVersion}, nil)
	mcp.AddTool(s, &mcp.Tool{
		Name: ToolSearch,
		Description: fmt.Sprintf("Search the mailbox. Lists the emails that hold every word of the query (in the sender, recipient, subject or body; case does not matter), newest first: id, folder, sender, date and subject, at most %d. Read one with read_email.",
			SearchLimit),
	}, e.search)
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolRead,
		Description: "Read one email: its folder, sender, recipient, date, subject and body.",
	}, e.read)
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolFolders,
		Description: "List the mailbox's folders and how many emails each holds.",
	}, e.folders)
	return s
}

// Handler serves the env's MCP server over streamable HTTP; mount it at /mcp.
func (e *Env) Handler() http.Handler {
	s := e.Server()
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func (e *Env) search(_ context.Context, _ *mcp.CallToolRequest, in SearchArgs) (*mcp.CallToolResult, any, error) {
	hits, total, err := e.box.Search(in.Query, SearchLimit)
	if err != nil {
		return nil, nil, err
	}
	e.log.Info("search", "query", in.Query, "matches", total)
	if total == 0 {
		return text(fmt.Sprintf("No email holds every word of %q. Try fewer or other words.", in.Query)), nil, nil
	}
	b, err := json.Marshal(hits)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the hits: %w", err)
	}
	out := string(b)
	if total > len(hits) {
		out += fmt.Sprintf("\n(%d of %d matching emails shown, newest first; add words to narrow the search.)", len(hits), total)
	}
	return text(out), nil, nil
}

func (e *Env) read(_ context.Context, _ *mcp.CallToolRequest, in ReadArgs) (*mcp.CallToolResult, any, error) {
	m, ok := e.box.Email(in.ID)
	if !ok {
		return nil, nil, fmt.Errorf("no email has id %q; ids look like m-12, as search_emails lists them", in.ID)
	}
	e.log.Info("read", "id", in.ID)
	return text(m.Text()), nil, nil
}

func (e *Env) folders(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
	b, err := json.Marshal(e.box.FolderCounts())
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the folders: %w", err)
	}
	return text(string(b)), nil, nil
}
