// Package terminal is agentenv's terminal server: the MCP env injected into
// a Harbor task's container (docs/harbor.md). It offers the model a shell
// (shell) and a file editor (editor), and the engine a hidden verifier
// (run_tests) that runs the task's tests/test.sh and reads the reward it
// writes. The tools are documented in docs/harbor-tools.md.
//
// It imports only the standard library and the MCP SDK, so its binary
// (cmd/agentenv-terminal) stays small and links statically.
package terminal

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool names.
const (
	ToolShell    = "shell"
	ToolEditor   = "editor"
	ToolRunTests = "run_tests"
)

// DefaultVerifierLogs is where a Harbor task's test.sh writes its reward.
const DefaultVerifierLogs = "/logs/verifier"

// DefaultMaxOutput bounds each of a command's stdout and stderr, and a
// view's text, as the model sees them.
const DefaultMaxOutput = 16 << 10

// maxRequestBody bounds a request: run_tests carries a task's whole tests
// folder, which may hold data files.
const maxRequestBody = 256 << 20

// Options configure a Server.
type Options struct {
	// Workdir is where commands run and relative paths start; it is made
	// when missing. Required.
	Workdir string
	// VerifierLogs is the folder test.sh writes reward.txt or reward.json
	// to; "" = DefaultVerifierLogs. Tests point it into a temp dir.
	VerifierLogs string
	// MaxOutput bounds each stream of a result (head and tail kept); 0 =
	// DefaultMaxOutput.
	MaxOutput int
	// Logger gets one line per call; nil = discard.
	Logger *slog.Logger
}

// Server is the terminal's MCP server. It is safe for concurrent calls:
// shell calls run side by side; edits and verifier runs take turns.
type Server struct {
	opts   Options
	mcp    *mcp.Server
	groups groupSet

	editMu   sync.Mutex // one edit at a time: read, change, rename
	verifyMu sync.Mutex // one verifier at a time: they share VerifierLogs
}

// New makes the server and its workdir.
func New(opts Options) (*Server, error) {
	if opts.Workdir == "" {
		return nil, fmt.Errorf("terminal: no workdir (set AGENTENV_WORKDIR or --workdir)")
	}
	wd, err := filepath.Abs(opts.Workdir)
	if err != nil {
		return nil, fmt.Errorf("terminal: workdir %q: %w", opts.Workdir, err)
	}
	if err := os.MkdirAll(wd, 0o755); err != nil {
		return nil, fmt.Errorf("terminal: making workdir: %w", err)
	}
	opts.Workdir = wd
	if opts.VerifierLogs == "" {
		opts.VerifierLogs = DefaultVerifierLogs
	}
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "agentenv-terminal", Version: "1"}, nil)
	s.addTools()
	return s, nil
}

// Workdir is the absolute workdir.
func (s *Server) Workdir() string { return s.opts.Workdir }

// MCP is the MCP server, for callers that serve it their own way.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Handler serves MCP streamable HTTP; mount it at /mcp. A call whose HTTP
// request ends (the client gave up) stops its command.
func (s *Server) Handler() http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
		&mcp.StreamableHTTPOptions{MaxRequestBodyBytes: maxRequestBody, PropagateRequestCancellation: true})
}

// Close kills every command still running; calls made after it fail.
func (s *Server) Close() { s.groups.killAll() }

func (s *Server) addTools() {
	mcp.AddTool(s.mcp, &mcp.Tool{Name: ToolShell, Description: shellDescription(s.opts.Workdir, s.opts.MaxOutput),
		InputSchema: json.RawMessage(shellSchema)}, typed(s.shell))
	mcp.AddTool(s.mcp, &mcp.Tool{Name: ToolEditor, Description: editorDescription(s.opts.Workdir),
		InputSchema: json.RawMessage(editorSchema)}, typed(s.editor))
	mcp.AddTool(s.mcp, &mcp.Tool{Name: ToolRunTests, Description: runTestsDescription(s.opts.VerifierLogs),
		InputSchema: json.RawMessage(runTestsSchema)}, typed(s.runTests))
}

// typed adapts a tool's handler: the SDK has checked the arguments against
// the tool's schema and decoded them; an error becomes a tool error (text
// the caller reads, IsError set), not a protocol error.
func typed[In any](h func(context.Context, In) (string, error)) mcp.ToolHandlerFor[In, any] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		text, err := h(ctx, in)
		if err != nil {
			return errorResult(err.Error()), nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
	}
}

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// path resolves a tool's path argument: absolute, or relative to the workdir.
func (s *Server) path(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(s.opts.Workdir, p)
}
