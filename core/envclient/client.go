// Package envclient talks to an env: an MCP streamable-HTTP server at
// <endpoint>/mcp. It waits for the env to answer, lists its tools and calls
// them with a deadline each.
package envclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool is one tool an env serves.
type Tool struct {
	Name        string
	Description string
	// Parameters is the tool's JSON Schema for its arguments object.
	Parameters json.RawMessage
}

// Result is the outcome of a tool call that the env answered.
type Result struct {
	// Text is the result's content as text: text parts joined by newlines,
	// other parts described in brackets.
	Text string
	// IsError is set when the tool reported an error; Text says what.
	IsError bool
	// Cut counts the bytes of the env's answer left unread past the
	// call's limit (CallRawLimited); Text holds what was kept.
	Cut int64
}

// Options tune Connect. The zero value is usable.
type Options struct {
	// AttemptTimeout bounds one initialize attempt (default 2s).
	AttemptTimeout time.Duration
	// RetryInterval is the first pause between attempts (default 2ms,
	// doubling to 250ms): sandboxes return from Deploy once the env listens,
	// so the first attempt usually answers, and a late one is seen soon.
	RetryInterval time.Duration
	// ClientName is sent in initialize (default "agentenv").
	ClientName string
	// MaxResultBytes bounds what CallTool reads of a tool's answer
	// (see CallRawLimited; 0 = no bound).
	MaxResultBytes int64

	// sdkCalls makes tool calls through the SDK's session, never the lean
	// path (the conformance test's reference).
	sdkCalls bool
}

// Client is a live MCP session with one env. Its methods are safe for
// concurrent use.
type Client struct {
	endpoint  string
	limit     int64 // Options.MaxResultBytes
	transport *http.Transport
	hc        *http.Client
	// clientName is what a session the SDK opens later says it is.
	clientName string
	// session is the SDK's session: the one the client connected with
	// when the env's answer was left to the SDK, or one opened later for
	// a listing left to it (sdkSession); nil until then.
	session     *mcp.ClientSession
	sessionOnce sync.Once
	sessionErr  error
	// lean makes the calls without the SDK (lean.go); nil: the SDK does.
	lean      *lean
	closeOnce sync.Once
	closeErr  error
}

// sdkSession is the SDK's session with the env: the one Connect opened,
// or, on a lean session, a second one opened now.
func (c *Client) sdkSession(ctx context.Context) (*mcp.ClientSession, error) {
	c.sessionOnce.Do(func() {
		if c.session != nil {
			return
		}
		client := mcp.NewClient(&mcp.Implementation{Name: c.clientName, Version: "1"}, nil)
		c.session, c.sessionErr = client.Connect(ctx, sdkTransport(c.endpoint, c.hc), &mcp.ClientSessionOptions{ProtocolVersion: proposedVersion})
	})
	return c.session, c.sessionErr
}

// proposedVersion is the protocol version Connect proposes in initialize.
const proposedVersion = "2025-11-25"

// MCPURL returns the MCP endpoint of an env whose base URL is endpoint.
func MCPURL(endpoint string) string {
	return strings.TrimRight(endpoint, "/") + "/mcp"
}

// Connect opens a session with the env at endpoint (its base URL), retrying
// initialize until the env answers or ctx ends. ctx should carry the
// readiness deadline; without one Connect retries until ctx is cancelled.
func Connect(ctx context.Context, endpoint string, opts Options) (*Client, error) {
	if opts.AttemptTimeout <= 0 {
		opts.AttemptTimeout = 2 * time.Second
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = 2 * time.Millisecond
	}
	if opts.ClientName == "" {
		opts.ClientName = "agentenv"
	}
	url := MCPURL(endpoint)
	wait := opts.RetryInterval
	var lastErr error
	for attempt := 1; ; attempt++ {
		c, err := connectOnce(ctx, url, opts)
		if err == nil {
			return c, nil
		}
		lastErr = err
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("env at %s not ready after %d attempts: %w (last error: %v)", url, attempt, ctx.Err(), lastErr)
		case <-timer.C:
		}
		wait = min(wait*2, 250*time.Millisecond)
	}
}

// sdkTransport is the SDK's transport to the env at url over hc.
func sdkTransport(url string, hc *http.Client) *mcp.StreamableClientTransport {
	return &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: hc,
		// Requests and responses are all the engine needs; the standalone
		// stream would hold a connection open per episode for nothing.
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}
}

func connectOnce(ctx context.Context, url string, opts Options) (*Client, error) {
	// A transport per client: closing it drops the env's connections, and
	// one env's stalls never hold another's pool.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // envs are local or private; never route them through a proxy
	hc := &http.Client{Transport: cutTransport{base: &keepConnTransport{base: tr}}}
	actx, cancel := context.WithTimeout(ctx, opts.AttemptTimeout)
	defer cancel()
	if !opts.sdkCalls {
		l, err := leanConnect(actx, url, opts, hc)
		if err == nil {
			return &Client{endpoint: url, limit: opts.MaxResultBytes, transport: tr, hc: hc, clientName: opts.ClientName, lean: l}, nil
		}
		if !errors.Is(err, errSDKConnect) {
			tr.CloseIdleConnections()
			return nil, err
		}
	}
	// Propose the newest version of the session protocol: the SDK would
	// first probe with server/discover (SEP-2575), a round trip per
	// deploy that envs answer with their versions and then initialize
	// anyway. A server that speaks only a newer version answers initialize
	// with it (the spec's negotiation), and the SDK goes on in that one.
	client := mcp.NewClient(&mcp.Implementation{Name: opts.ClientName, Version: "1"}, nil)
	session, err := client.Connect(actx, sdkTransport(url, hc), &mcp.ClientSessionOptions{ProtocolVersion: proposedVersion})
	if err != nil {
		tr.CloseIdleConnections()
		return nil, err
	}
	c := &Client{endpoint: url, limit: opts.MaxResultBytes, transport: tr, hc: hc, clientName: opts.ClientName, session: session}
	if v := session.InitializeResult().ProtocolVersion; leanVersions[v] && !opts.sdkCalls {
		c.lean = &lean{http: hc, sessionID: session.ID(), version: v}
	}
	return c, nil
}

// Endpoint is the MCP URL the client talks to.
func (c *Client) Endpoint() string { return c.endpoint }

// ListTools returns every tool the env serves, following pagination.
func (c *Client) ListTools(ctx context.Context) ([]Tool, error) {
	if c.lean != nil {
		tools, err := c.leanListTools(ctx)
		if !errors.Is(err, errSDKList) {
			return tools, err
		}
	}
	session, err := c.sdkSession(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing tools of %s: %w", c.endpoint, err)
	}
	var tools []Tool
	params := &mcp.ListToolsParams{}
	for page := 0; ; page++ {
		if page > 1000 {
			return nil, fmt.Errorf("listing tools of %s: more than 1000 pages; the env's cursor does not advance", c.endpoint)
		}
		res, err := session.ListTools(ctx, params)
		if err != nil {
			return nil, fmt.Errorf("listing tools of %s: %w", c.endpoint, err)
		}
		for _, t := range res.Tools {
			schema, err := json.Marshal(t.InputSchema)
			if err != nil {
				return nil, fmt.Errorf("listing tools of %s: tool %q: input schema: %w", c.endpoint, t.Name, err)
			}
			if t.InputSchema == nil {
				schema = json.RawMessage(`{"type":"object"}`)
			}
			tools = append(tools, Tool{Name: t.Name, Description: t.Description, Parameters: schema})
		}
		if res.NextCursor == "" {
			return tools, nil
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
}

// leanListTools is ListTools on the lean path; each schema is decoded
// and encoded again, as the SDK's listing gives it (keys sorted), so the
// tools the model sees do not depend on the path.
func (c *Client) leanListTools(ctx context.Context) ([]Tool, error) {
	var tools []Tool
	cursor := ""
	for page := 0; ; page++ {
		if page > 1000 {
			return nil, fmt.Errorf("listing tools of %s: more than 1000 pages; the env's cursor does not advance", c.endpoint)
		}
		raw, err := c.lean.list(ctx, c.endpoint, cursor)
		if err != nil {
			if errors.Is(err, errSDKList) {
				return nil, err
			}
			return nil, fmt.Errorf("listing tools of %s: %w", c.endpoint, err)
		}
		pageTools, next, err := listed.page(raw)
		if err != nil {
			return nil, fmt.Errorf("listing tools of %s: %w", c.endpoint, err)
		}
		tools = append(tools, pageTools...)
		if next == "" {
			return tools, nil
		}
		cursor = next
	}
}

// ErrTimeout is wrapped by CallTool when the env does not answer in time.
var ErrTimeout = errors.New("tool call timed out")

// CallTool calls a tool with arguments (a JSON object; empty means {}),
// waiting at most timeout (0 = only ctx bounds it) and reading at most
// Options.MaxResultBytes of its answer. A tool that reports an error is a
// Result with IsError, not an error; an error means the env did not
// answer properly (down, timed out, protocol error).
func (c *Client) CallTool(ctx context.Context, name string, arguments json.RawMessage, timeout time.Duration) (Result, error) {
	args := map[string]any{}
	if len(arguments) > 0 && string(arguments) != "null" {
		if err := json.Unmarshal(arguments, &args); err != nil {
			return Result{}, fmt.Errorf("calling %s: arguments are not a JSON object: %w", name, err)
		}
	}
	return c.callLimited(ctx, name, args, timeout, c.limit)
}

// CallRawLimited is CallTool with the arguments sent as written (key
// order, number spelling and escapes are the caller's, only the whitespace
// between tokens goes), reading at most about limit bytes of string
// content from the env's answer (0 = no limit): longer strings are cut as
// the answer streams in, never held whole, and Result.Cut counts what was
// dropped. Short strings (keys, types) and the answer's structure are
// kept, so the answer still decodes; Text may exceed limit by them.
func (c *Client) CallRawLimited(ctx context.Context, name string, args json.RawMessage, timeout time.Duration, limit int64) (Result, error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return c.callLimited(ctx, name, args, timeout, limit)
}

// callLimited sends args (a map or json.RawMessage) as the arguments.
func (c *Client) callLimited(ctx context.Context, name string, args any, timeout time.Duration, limit int64) (Result, error) {
	var cut *callCut
	if limit > 0 {
		cut = &callCut{limit: limit}
		ctx = withCut(ctx, cut)
	}
	res, err := c.call(ctx, name, args, timeout)
	if cut != nil {
		res.Cut = cut.cut.Load()
	}
	return res, err
}

func (c *Client) call(ctx context.Context, name string, args any, timeout time.Duration) (Result, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var res Result
	var err error
	if c.lean != nil {
		res, err = c.lean.call(ctx, c.endpoint, name, args)
	} else {
		var r *mcp.CallToolResult
		if r, err = c.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args}); err == nil {
			res = Result{Text: ResultText(r), IsError: r.IsError}
		}
	}
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			if timeout > 0 {
				return Result{}, fmt.Errorf("calling %s on %s: no answer within %s: %w", name, c.endpoint, timeout, ErrTimeout)
			}
			return Result{}, fmt.Errorf("calling %s on %s: %w: %w", name, c.endpoint, ErrTimeout, ctx.Err())
		}
		return Result{}, fmt.Errorf("calling %s on %s: %w", name, c.endpoint, err)
	}
	return res, nil
}

// ResultText renders a tool result's content as text.
func ResultText(res *mcp.CallToolResult) string {
	parts := make([]string, 0, len(res.Content))
	for _, c := range res.Content {
		switch v := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, v.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", v.MIMEType, len(v.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", v.MIMEType, len(v.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s]", v.URI))
		case *mcp.EmbeddedResource:
			if v.Resource != nil && v.Resource.Text != "" {
				parts = append(parts, v.Resource.Text)
			} else if v.Resource != nil {
				parts = append(parts, fmt.Sprintf("[resource %s]", v.Resource.URI))
			}
		default:
			b, _ := json.Marshal(c)
			parts = append(parts, string(b))
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return string(b)
		}
	}
	return strings.Join(parts, "\n")
}

// Ping checks that the env still answers on its session (an MCP ping):
// a sandbox kept warm is pinged before an episode takes it.
func (c *Client) Ping(ctx context.Context) error {
	var err error
	if c.lean != nil {
		err = c.lean.ping(ctx, c.endpoint)
	} else {
		err = c.session.Ping(ctx, nil)
	}
	if err != nil {
		return fmt.Errorf("pinging %s: %w", c.endpoint, err)
	}
	return nil
}

// Drop drops the client's connections without ending the session on the
// env: for an env about to be torn down, whose end ends the session, so a
// DELETE would be a round trip (and, on a hung env, a wait of up to
// closeTimeout) for nothing. Close after Drop does nothing more.
func (c *Client) Drop() {
	c.closeOnce.Do(func() {
		c.sessionOnce.Do(func() {})
		c.transport.CloseIdleConnections()
	})
}

// Close ends the session and drops the client's connections. It is
// idempotent; the SDK bounds the session DELETE, so a dead env cannot make
// it hang.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.sessionOnce.Do(func() {}) // no session opens past here
		if c.session != nil {
			c.closeErr = c.session.Close()
		}
		if c.lean != nil {
			c.closeErr = errors.Join(c.closeErr, c.lean.end(c.endpoint))
		}
		c.transport.CloseIdleConnections()
	})
	return c.closeErr
}
