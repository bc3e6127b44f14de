package skyrl

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
)

// Catalog is what the writer reads from a bundle's server: its splits,
// their tasks, each task's prompt and each toolset's tools.
type Catalog interface {
	Splits(ctx context.Context) ([]Split, error)
	// Tasks returns the tasks of split with index in [start, stop).
	Tasks(ctx context.Context, split string, start, stop int) ([]TaskEntry, error)
	Task(ctx context.Context, id string) (Task, error)
	// Tools returns a toolset's tools as a JSON list of OpenAI function
	// schemas, bytes as sent: the template dumps them in their key order.
	// The server deploys an env of the toolset to list them.
	Tools(ctx context.Context, toolset string) (json.RawMessage, error)
}

// Split is a split and its size.
type Split struct {
	Name string `json:"name"`
	Size int    `json:"size"`
}

// TaskEntry is a task's place in a split.
type TaskEntry struct {
	Index   int    `json:"index"`
	TaskID  string `json:"task_id"`
	Toolset string `json:"toolset"`
}

// Task is a task's opening prompt.
type Task struct {
	TaskID  string    `json:"task_id"`
	Toolset string    `json:"toolset"`
	Prompt  []Message `json:"prompt"`
}

// ErrUnauthorized is a server that refused the token (or wanted one).
var ErrUnauthorized = errors.New("the server refused the token")

// ErrDeploy is a server that could not deploy a toolset's env to list
// its tools.
var ErrDeploy = errors.New("the server could not deploy the toolset's env")

// HTTPCatalog reads a catalogue over agentenv serve's HTTP endpoints. A
// server that still builds its envs (503 PREPARING) is waited out for as
// long as the caller's context allows, each wait told to OnPreparing.
type HTTPCatalog struct {
	base   *url.URL
	token  string
	client *http.Client
	// OnPreparing, when set, hears what the server still builds (its
	// message) at the first PREPARING answer, when that changes, and every
	// preparingNoteEvery while it lasts.
	OnPreparing func(msg string)
	// preparingPause is the wait between tries while the server prepares.
	preparingPause time.Duration
}

// preparingNoteEvery is how often an unchanged "still preparing" is told.
const preparingNoteEvery = 10 * time.Second

// errPreparing is a 503 PREPARING: the server listens but builds its envs.
type errPreparing struct{ msg string }

func (e *errPreparing) Error() string { return e.msg }

// NewHTTPCatalog reads the server at baseURL, sending token (if any) as
// a Bearer token.
func NewHTTPCatalog(baseURL, token string) (*HTTPCatalog, error) {
	u, err := ServerURL(baseURL)
	if err != nil {
		return nil, err
	}
	base, _ := url.Parse(u)
	// No client-wide timeout: listing a toolset's tools deploys an env
	// (the server bounds that at 5 minutes); each call has its own.
	return &HTTPCatalog{base: base, token: token, client: &http.Client{}, preparingPause: 2 * time.Second}, nil
}

// ServerURL checks a server URL as the rows record it: http(s), no
// token in it, no trailing slash.
func ServerURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error quotes the URL, which may hold a password
		}
		return "", fmt.Errorf("server URL is not a valid URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("server URL %q: want http://host:port or https://host", u.Redacted())
	}
	if u.User != nil {
		return "", errors.New("server URL: the rows record the URL, so it must not hold a token; put the token in an environment variable and name it with --token-var")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("server URL %q: want no query or fragment", u.Redacted())
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return u.String(), nil
}

// Splits implements Catalog.
func (c *HTTPCatalog) Splits(ctx context.Context) ([]Split, error) {
	var r struct{ Splits []Split }
	err := c.get(ctx, "/splits", nil, time.Minute, &r)
	return r.Splits, err
}

// Tasks implements Catalog.
func (c *HTTPCatalog) Tasks(ctx context.Context, split string, start, stop int) ([]TaskEntry, error) {
	var r struct{ Tasks []TaskEntry }
	q := url.Values{"start": {strconv.Itoa(start)}, "stop": {strconv.Itoa(stop)}}
	err := c.get(ctx, "/splits/"+url.PathEscape(split)+"/tasks", q, time.Minute, &r)
	return r.Tasks, err
}

// Task implements Catalog.
func (c *HTTPCatalog) Task(ctx context.Context, id string) (Task, error) {
	var t Task
	// Task ids hold slashes (day/eval-001), which the route takes as is.
	segs := strings.Split(id, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	err := c.get(ctx, "/tasks/"+strings.Join(segs, "/"), nil, time.Minute, &t)
	return t, err
}

// Tools implements Catalog.
func (c *HTTPCatalog) Tools(ctx context.Context, toolset string) (json.RawMessage, error) {
	var r struct{ Tools json.RawMessage }
	err := c.get(ctx, "/toolsets/"+url.PathEscape(toolset)+"/tools", nil, 6*time.Minute, &r)
	return r.Tools, err
}

// BundleName is the served bundle's name, from GET /metadata.
func (c *HTTPCatalog) BundleName(ctx context.Context) (string, error) {
	var r struct{ Name string }
	err := c.get(ctx, "/metadata", nil, time.Minute, &r)
	return r.Name, err
}

func (c *HTTPCatalog) get(ctx context.Context, path string, q url.Values, timeout time.Duration, v any) error {
	var told string
	var toldAt time.Time
	for {
		err := c.getOnce(ctx, path, q, timeout, v)
		var prep *errPreparing
		if !errors.As(err, &prep) {
			return err
		}
		if c.OnPreparing != nil && (prep.msg != told || time.Since(toldAt) >= preparingNoteEvery) {
			c.OnPreparing(prep.msg)
			told, toldAt = prep.msg, time.Now()
		}
		t := time.NewTimer(c.preparingPause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("GET %s: gave up waiting for the server to finish preparing (%w): %s", path, ctx.Err(), prep.msg)
		case <-t.C:
		}
	}
}

func (c *HTTPCatalog) getOnce(ctx context.Context, path string, q url.Values, timeout time.Duration, v any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// path is escaped already; the base keeps any prefix the URL has.
	u := c.base.String() + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("GET %s from %s: %w", path, c.base.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("GET %s: read the answer: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Detail, Code string }
		_ = json.Unmarshal(body, &e)
		detail := e.Detail
		if detail == "" {
			detail = strings.TrimSpace(string(body[:min(len(body), 300)]))
		}
		switch {
		case resp.StatusCode == http.StatusUnauthorized:
			return fmt.Errorf("GET %s: %w", path, ErrUnauthorized)
		case e.Code == "DEPLOY_FAILED":
			return fmt.Errorf("%w: %s", ErrDeploy, detail)
		case e.Code == "PREPARING":
			return &errPreparing{msg: detail}
		}
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, detail)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: the answer is not the JSON expected: %w", path, err)
	}
	return nil
}
