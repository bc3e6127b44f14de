package envclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// The lean tools/call (and tools/list). A server spends most of its CPU per rollout on the
// env's tool calls, and through the MCP Go SDK (v1.8) each call's answer
// is decoded three to four times, each by a fresh JSON decoder with a
// 32 KiB buffer (its internal/json.Unmarshal): about three quarters of
// everything the server allocates (docs/performance.md). tools/call is
// the one hot call, and a simple one on the wire: one POST on the
// session, answered by one JSON-RPC response (as a JSON body, or as an
// event of an SSE stream the server ends after it). The client makes it
// here with encoding/json, reading the answer once, through the same HTTP
// client (the result cutter and the kept connections apply alike); so is
// tools/list, whose SDK listing re-decodes every tool's schema; and so
// is the connect (leanconnect.go). It is used only on sessions that
// negotiated a protocol version it speaks (leanVersions);
// TestLeanCallConformance holds its answers to the SDK's, call for call,
// on real SDK servers.

// leanVersions are the negotiated protocol versions whose tools/call the
// lean client makes: sessions with an id, no per-request headers beyond
// the session's and the version's.
var leanVersions = map[string]bool{"2025-11-25": true, "2025-06-18": true, "2025-03-26": true}

// leanMaxLine bounds one SSE line the lean reader holds outside string
// content the cutter already bounds.
const leanMaxLine = 64 << 20

// lean is what a lean call needs of the session.
type lean struct {
	http      *http.Client
	sessionID string
	version   string
	nextID    atomic.Uint64
}

// rpcResponse is a JSON-RPC message as the lean call reads it: a response
// to its call (id, result or error), or a request or notification of the
// server's on the call's stream (method), which it skips.
type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// wireResult is a CallToolResult as it comes.
type wireResult struct {
	Content           []wireContent   `json:"content"`
	IsError           bool            `json:"isError"`
	StructuredContent json.RawMessage `json:"structuredContent"`
}

type wireContent struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	MIMEType string `json:"mimeType"`
	Data     string `json:"data"`
	URI      string `json:"uri"`
	Resource *struct {
		URI  string `json:"uri"`
		Text string `json:"text"`
	} `json:"resource"`
}

// call makes one tools/call and returns its answer as Call does.
func (l *lean) call(ctx context.Context, endpoint, name string, args any) (Result, error) {
	raw, err := l.rpc(ctx, endpoint, "tools/call", struct {
		Name      string `json:"name"`
		Arguments any    `json:"arguments"`
	}{name, args})
	if err != nil {
		return Result{}, err
	}
	var res wireResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return Result{}, fmt.Errorf("calling %q: reading the result: %w", "tools/call", err)
	}
	text, err := res.text()
	if err != nil {
		return Result{}, fmt.Errorf("calling %q: %w", "tools/call", err)
	}
	return Result{Text: text, IsError: res.IsError}, nil
}

// listPage is one page of tools/list as it comes.
type listPage struct {
	Tools []*struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	} `json:"tools"`
	NextCursor string `json:"nextCursor"`
}

// errSDKList marks a listing the lean client leaves to the SDK: a tool
// schema with x-mcp-header annotations, which the SDK checks and may drop.
var errSDKList = errors.New("tools/list left to the SDK")

// list makes one tools/list request for the page at cursor and returns
// its result as it came (listMemo.page reads it).
func (l *lean) list(ctx context.Context, endpoint, cursor string) (json.RawMessage, error) {
	params := struct {
		Cursor string `json:"cursor,omitempty"`
	}{cursor}
	raw, err := l.rpc(ctx, endpoint, "tools/list", params)
	if err != nil {
		return nil, err
	}
	if bytes.Contains(raw, []byte("x-mcp-header")) {
		return nil, errSDKList
	}
	return raw, nil
}

// rpc makes one JSON-RPC call on the session and returns its result.
func (l *lean) rpc(ctx context.Context, endpoint, method string, params any) (json.RawMessage, error) {
	raw, _, err := l.exchange(ctx, endpoint, method, params)
	return raw, err
}

// post sends one JSON-RPC message (a request with id, or a notification
// without) on the session.
func (l *lean) post(ctx context.Context, endpoint, method, id string, params any) (*http.Response, error) {
	// Sent as written: no HTML escaping of <, > and & (the SDK's encoder
	// leaves them too).
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      string `json:"id,omitempty"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", id, method, params})
	if err != nil {
		return nil, fmt.Errorf("calling %q: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, &body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	l.setHeaders(req)
	resp, err := l.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("calling %q: %w", method, err)
	}
	return resp, nil
}

// setHeaders names the session and its protocol version, once known.
func (l *lean) setHeaders(req *http.Request) {
	if l.version != "" {
		req.Header.Set("Mcp-Protocol-Version", l.version)
	}
	if l.sessionID != "" {
		req.Header.Set("Mcp-Session-Id", l.sessionID)
	}
}

// exchange makes one JSON-RPC call and returns its result and the
// session id the answer carries (initialize's).
func (l *lean) exchange(ctx context.Context, endpoint, method string, params any) (json.RawMessage, string, error) {
	id := "agentenv-" + strconv.FormatUint(l.nextID.Add(1), 10)
	resp, err := l.post(ctx, endpoint, method, id, params)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	raw, err := readAnswer(resp, method, id)
	return raw, resp.Header.Get("Mcp-Session-Id"), err
}

// statusError says what an answer of an unexpected status said (its
// first 512 bytes).
func statusError(resp *http.Response, method string) error {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return fmt.Errorf("calling %q: %s: %s", method, resp.Status, strings.TrimSpace(string(msg)))
}

// readAnswer reads the JSON-RPC response to id from a call's answer.
func readAnswer(resp *http.Response, method, id string) (json.RawMessage, error) {
	var err error
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(resp, method)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var msg *rpcResponse
	switch mt {
	case "application/json":
		msg = &rpcResponse{}
		if err := json.NewDecoder(resp.Body).Decode(msg); err != nil {
			return nil, fmt.Errorf("calling %q: reading the answer: %w", method, err)
		}
		// To its end, so the connection goes back to the pool.
		_, _ = io.Copy(io.Discard, resp.Body)
	case "text/event-stream":
		if msg, err = readSSEResponse(resp.Body, id); err != nil {
			return nil, fmt.Errorf("calling %q: %w", method, err)
		}
		// The server ends the stream after the answer: read it to its end
		// so the connection goes back to the pool.
		_, _ = io.Copy(io.Discard, resp.Body)
	default:
		return nil, fmt.Errorf("calling %q: unsupported content type %q", method, mt)
	}
	if string(msg.ID) != strconv.Quote(id) {
		return nil, fmt.Errorf("calling %q: the answer is to request %s, not %s", method, msg.ID, id)
	}
	if msg.Error != nil {
		return nil, fmt.Errorf("calling %q: %s", method, msg.Error.Message)
	}
	if len(msg.Result) == 0 || string(msg.Result) == "null" {
		return nil, fmt.Errorf("calling %q: the answer has neither result nor error", method)
	}
	return msg.Result, nil
}

// sseReaders keeps the lean reader's buffers from call to call: a fresh
// 4 KiB one per answer was a tenth of what serve allocated per rollout.
var sseReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}

// readSSEResponse reads SSE events until the JSON-RPC response to id.
func readSSEResponse(body io.Reader, id string) (*rpcResponse, error) {
	r := sseReaders.Get().(*bufio.Reader)
	r.Reset(body)
	defer func() {
		r.Reset(nil)
		sseReaders.Put(r)
	}()
	var data []byte
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) { // a long line: gather it
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				if len(long) > leanMaxLine {
					return nil, fmt.Errorf("an SSE line over %d bytes", leanMaxLine)
				}
				line, err = r.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
		}
		// A blank line ends an event; so does the stream's end.
		if (len(line) == 0 || err != nil) && len(data) > 0 {
			msg := &rpcResponse{}
			if jerr := json.Unmarshal(data, msg); jerr != nil {
				return nil, fmt.Errorf("reading the answer: %w", jerr)
			}
			data = data[:0]
			if msg.Method == "" && string(msg.ID) == strconv.Quote(id) {
				return msg, nil
			}
			// The server's own request or notification, or another call's.
		}
		if err != nil {
			return nil, errors.New("the stream ended before the answer")
		}
	}
}

// text renders the result's content as ResultText renders the SDK's.
func (w *wireResult) text() (string, error) {
	parts := make([]string, 0, len(w.Content))
	for _, c := range w.Content {
		switch c.Type {
		case "text":
			parts = append(parts, c.Text)
		case "image", "audio":
			b, err := base64.StdEncoding.DecodeString(c.Data)
			if err != nil {
				return "", fmt.Errorf("%s content: %w", c.Type, err)
			}
			parts = append(parts, fmt.Sprintf("[%s %s, %d bytes]", c.Type, c.MIMEType, len(b)))
		case "resource_link":
			parts = append(parts, fmt.Sprintf("[resource %s]", c.URI))
		case "resource":
			if c.Resource != nil && c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			} else if c.Resource != nil {
				parts = append(parts, fmt.Sprintf("[resource %s]", c.Resource.URI))
			}
		default:
			return "", fmt.Errorf("unrecognized content type %q", c.Type)
		}
	}
	if len(parts) == 0 && len(w.StructuredContent) > 0 && string(w.StructuredContent) != "null" {
		var v any
		if err := json.Unmarshal(w.StructuredContent, &v); err == nil {
			if b, err := json.Marshal(v); err == nil {
				return string(b), nil
			}
		}
	}
	return strings.Join(parts, "\n"), nil
}
