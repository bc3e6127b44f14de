package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// Defaults for zero Options fields.
const (
	DefaultPingInterval  = 20 * time.Second
	DefaultMaxReplyBytes = 128 << 20
)

// Options configure a Client and the Sessions it opens. The zero value
// suits a server without a token.
type Options struct {
	// Token is sent as "Authorization: Bearer <token>" on every request
	// and on the WebSocket upgrade. When empty, the password of the URL's
	// userinfo (http://user:<token>@host) is the token, if there is one.
	Token string
	// HTTPClient makes the catalogue requests; nil: http.DefaultClient.
	// The WebSocket dialer takes its proxy and TLS settings when its
	// Transport is an *http.Transport.
	HTTPClient *http.Client
	// PingInterval is how often a session pings the server; a session
	// that hears nothing (frame, ping or pong) for twice as long is
	// dropped as dead. 0: DefaultPingInterval; negative: never ping and
	// never time out.
	PingInterval time.Duration
	// MaxReplyBytes caps one answer of the server (a reset's prompt and
	// tools can be large). 0: DefaultMaxReplyBytes.
	MaxReplyBytes int64
	// OnRetry, when set, is called each time a call waits out a server
	// that is not ready, with the failure and the time until the next try
	// (to log "server at capacity, retrying in 1.6s").
	OnRetry func(err error, wait time.Duration)
}

// Client talks to one agentenv server: its HTTP catalogue directly, its
// session protocol through the Sessions that Connect opens. A Client is
// safe for concurrent use.
type Client struct {
	base   *url.URL // http or https, no userinfo, no trailing "/" or "/ws"
	ws     string   // the session URL
	token  string
	opts   Options
	http   *http.Client
	dialer *websocket.Dialer
}

// New makes a Client for the server at rawURL: its base URL
// (http://127.0.0.1:8200, https://envs.example.com/prefix), its /ws URL,
// or host:port. It connects to nothing.
func New(rawURL string, opts Options) (*Client, error) {
	base, urlToken, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if opts.PingInterval == 0 {
		opts.PingInterval = DefaultPingInterval
	}
	if opts.MaxReplyBytes <= 0 {
		opts.MaxReplyBytes = DefaultMaxReplyBytes
	}
	c := &Client{base: base, token: opts.Token, opts: opts, http: opts.HTTPClient,
		dialer: &websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 45 * time.Second}}
	if c.token == "" {
		c.token = urlToken
	}
	if c.http == nil {
		c.http = http.DefaultClient
	}
	if t, ok := c.http.Transport.(*http.Transport); ok {
		c.dialer.Proxy, c.dialer.TLSClientConfig = t.Proxy, t.TLSClientConfig
	}
	ws := *base
	ws.Scheme = map[string]string{"http": "ws", "https": "wss"}[base.Scheme]
	ws.Path += "/ws"
	c.ws = ws.String()
	return c, nil
}

// parseURL reads a server URL into its http(s) base and the token its
// userinfo carries. Errors never quote the URL's userinfo.
func parseURL(raw string) (*url.URL, string, error) {
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		// Not url.Error, which quotes the whole URL, password included.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, "", fmt.Errorf("server URL is not a valid URL: %w", err)
	}
	var token string
	if u.User != nil {
		token, _ = u.User.Password()
		u.User = nil
	}
	switch u.Scheme {
	case "http", "ws":
		u.Scheme = "http"
	case "https", "wss":
		u.Scheme = "https"
	default:
		return nil, "", fmt.Errorf("server URL %s: want http://, https://, ws:// or wss://", u.Redacted())
	}
	if u.Host == "" {
		return nil, "", errors.New("server URL has no host: want http://HOST:PORT")
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/ws")
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u, token, nil
}

// Dial connects to the server at rawURL (see New) and opens a Session.
// With a deadline on ctx it waits out a server that is restarting or
// draining (see the package doc).
func Dial(ctx context.Context, rawURL string, opts Options) (*Session, error) {
	c, err := New(rawURL, opts)
	if err != nil {
		return nil, err
	}
	return c.Connect(ctx)
}

// BaseURL returns the server's base URL, without any userinfo.
func (c *Client) BaseURL() string { return c.base.String() }

// HasToken reports whether requests carry a token (from Options.Token or
// the URL's userinfo).
func (c *Client) HasToken() bool { return c.token != "" }

func (c *Client) authorize(h http.Header) {
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
}

// Health returns nil when the server answers /health with 200. A draining
// server's 503 is an *Error with CodeShuttingDown. With a deadline on ctx,
// Health waits for the server to come up, so it also serves as "wait
// until the server is ready".
func (c *Client) Health(ctx context.Context) error {
	return c.get(ctx, "health", nil, nil)
}

// Splits lists the bundle's splits in order, "all" first.
func (c *Client) Splits(ctx context.Context) ([]Split, error) {
	var out struct {
		Splits []Split `json:"splits"`
	}
	if err := c.get(ctx, "splits", nil, &out); err != nil {
		return nil, err
	}
	for _, s := range out.Splits {
		if s.Size < 0 {
			return nil, fmt.Errorf("GET /splits: the server says split %q has %d tasks, which is not a size", s.Name, s.Size)
		}
	}
	return out.Splits, nil
}

// Tasks lists the tasks of split with index in [start, stop); stop < 0
// means to the end of the split. An unknown split is CodeNotFound.
func (c *Client) Tasks(ctx context.Context, split string, start, stop int) (TaskPage, error) {
	q := url.Values{"start": {strconv.Itoa(start)}}
	if stop >= 0 {
		q.Set("stop", strconv.Itoa(stop))
	}
	var out TaskPage
	if err := c.get(ctx, "splits/"+url.PathEscape(split)+"/tasks", q, &out); err != nil {
		return out, err
	}
	// What the server says is checked before a caller sizes anything by it.
	if out.Size < 0 || len(out.Tasks) > out.Size || (stop >= 0 && len(out.Tasks) > max(stop-start, 0)) {
		return TaskPage{}, fmt.Errorf("GET /splits/%s/tasks: the server sent %d tasks of a split of %d for [%d, %d), which does not add up", split, len(out.Tasks), out.Size, start, stop)
	}
	return out, nil
}

// Task describes the task with id (ids may hold "/": day/eval-001). An
// unknown id is CodeNotFound.
func (c *Client) Task(ctx context.Context, id string) (TaskInfo, error) {
	parts := strings.Split(id, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	var out TaskInfo
	err := c.get(ctx, "tasks/"+strings.Join(parts, "/"), nil, &out)
	return out, err
}

// ToolsetTools returns the tools a task of toolset offers in its first
// turn. The server's first answer for a toolset deploys an env to list
// them, so it can take a while; later ones are cached.
func (c *Client) ToolsetTools(ctx context.Context, toolset string) ([]Tool, error) {
	var out struct {
		Tools []Tool `json:"tools"`
	}
	err := c.get(ctx, "toolsets/"+url.PathEscape(toolset)+"/tools", nil, &out)
	return out.Tools, err
}

// get GETs the escaped path under the base URL and decodes the JSON answer
// into out (nil: discard it).
func (c *Client) get(ctx context.Context, path string, q url.Values, out any) error {
	u := *c.base
	u.RawPath = c.base.EscapedPath() + "/" + path
	var err error
	if u.Path, err = url.PathUnescape(u.RawPath); err != nil {
		return fmt.Errorf("GET /%s: %w", path, err)
	}
	u.RawQuery = q.Encode()
	what := "GET " + u.RequestURI()
	err = c.retry(ctx, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return err
		}
		c.authorize(req.Header)
		resp, err := c.http.Do(req)
		if err != nil {
			var ue *url.Error // it repeats the URL, which what already says
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return httpError(resp)
		}
		body := io.LimitReader(resp.Body, c.opts.MaxReplyBytes)
		if out == nil {
			_, err := io.Copy(io.Discard, body)
			return err
		}
		if err := json.NewDecoder(body).Decode(out); err != nil {
			return fmt.Errorf("the answer does not decode: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
