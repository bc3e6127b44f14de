// Package rollout plays episodes of a served bundle the way a trainer
// does: one OpenEnv WebSocket session per rollout, a reset, then one step
// per model reply until the observation says done. It is the client side
// of docs/protocol.md, written from that page.
package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// Message is one chat message of an observation.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Tool is a tool offered to the model, as an OpenAI function schema.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// Observation is the server's answer to a reset or a step.
type Observation struct {
	EpisodeID string             `json:"episode_id"`
	TaskID    string             `json:"task_id"`
	Messages  []Message          `json:"messages"`
	Tools     []Tool             `json:"tools"`
	Turn      int                `json:"turn"`
	Metrics   map[string]float64 `json:"metrics"`
	Reward    *float64           `json:"-"`
	Done      bool               `json:"-"`
}

// Reset names the task to play and how.
type Reset struct {
	Split      string `json:"split,omitempty"`
	Index      *int   `json:"index,omitempty"`
	TaskID     string `json:"task_id,omitempty"`
	ToolFormat string `json:"tool_format,omitempty"`
	MaxTurns   int    `json:"max_turns,omitempty"`
}

// ServerError is an error frame from the server.
type ServerError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *ServerError) Error() string { return e.Code + ": " + e.Message }

// Client is one WebSocket session.
type Client struct {
	conn *websocket.Conn
}

// callTimeout bounds one request when the context sets no deadline: a
// reset may deploy an env and build it first.
const callTimeout = 5 * time.Minute

// Dial opens a session on the server at base (http://127.0.0.1:8200 or its
// ws:// URL), with token as a Bearer token when not empty.
func Dial(ctx context.Context, base, token string) (*Client, error) {
	target, err := SessionURL(base)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	conn, resp, err := d.DialContext(ctx, target, h)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return nil, fmt.Errorf("connecting to %s: the server wants a token", target)
		}
		return nil, fmt.Errorf("connecting to %s: %w", target, err)
	}
	conn.SetReadLimit(64 << 20)
	return &Client{conn: conn}, nil
}

// SessionURL turns a server's base URL into its session URL: http -> ws,
// https -> wss, /ws appended.
func SessionURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("server URL %q: want http://HOST:PORT or ws://HOST:PORT/ws", base)
	}
	switch u.Scheme {
	case "http", "ws":
		u.Scheme = "ws"
	case "https", "wss":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("server URL %q: want http(s):// or ws(s)://", base)
	}
	if u.User != nil {
		return "", fmt.Errorf("server URL %q: give the token in its variable, not in the URL", u.Redacted())
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if !strings.HasSuffix(u.Path, "/ws") {
		u.Path += "/ws"
	}
	return u.String(), nil
}

// Reset starts an episode.
func (c *Client) Reset(ctx context.Context, r Reset) (Observation, error) {
	return c.call(ctx, "reset", r)
}

// Step sends one model reply.
func (c *Client) Step(ctx context.Context, reply string) (Observation, error) {
	return c.call(ctx, "step", map[string]string{"reply": reply})
}

// Close ends the session: the server tears down a live episode.
func (c *Client) Close() error {
	_ = c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	werr := c.conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"close"}`))
	cerr := c.conn.Close()
	return errors.Join(werr, cerr)
}

func (c *Client) call(ctx context.Context, typ string, data any) (Observation, error) {
	frame, err := json.Marshal(map[string]any{"type": typ, "data": data})
	if err != nil {
		return Observation{}, fmt.Errorf("encoding the %s: %w", typ, err)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(callTimeout)
	}
	_ = c.conn.SetWriteDeadline(deadline)
	_ = c.conn.SetReadDeadline(deadline)
	// A cancelled context ends a read that is waiting on the server.
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetReadDeadline(time.Now()) })
	defer stop()
	if err := c.conn.WriteMessage(websocket.TextMessage, frame); err != nil {
		return Observation{}, fmt.Errorf("sending the %s: %w", typ, err)
	}
	_, msg, err := c.conn.ReadMessage()
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return Observation{}, fmt.Errorf("waiting for the answer to the %s: %w", typ, err)
	}
	var env struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(msg, &env); err != nil {
		return Observation{}, fmt.Errorf("the answer to the %s is not JSON: %.200q", typ, msg)
	}
	switch env.Type {
	case "observation":
	case "error":
		var e ServerError
		if err := json.Unmarshal(env.Data, &e); err != nil {
			return Observation{}, fmt.Errorf("the server answered the %s with an error frame that does not read: %.200q", typ, env.Data)
		}
		return Observation{}, &e
	default:
		return Observation{}, fmt.Errorf("the server answered the %s with a %q frame: %.200q", typ, env.Type, msg)
	}
	var d struct {
		Observation Observation `json:"observation"`
		Reward      *float64    `json:"reward"`
		Done        bool        `json:"done"`
	}
	if err := json.Unmarshal(env.Data, &d); err != nil {
		return Observation{}, fmt.Errorf("reading the observation of the %s: %w", typ, err)
	}
	obs := d.Observation
	obs.Reward, obs.Done = d.Reward, d.Done
	return obs, nil
}
