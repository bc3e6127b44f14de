package skyrl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/agentenv/agentenv/client"
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

// HTTPCatalog reads a catalogue over agentenv serve's HTTP endpoints,
// through the Go client. A server that still builds its envs (503
// PREPARING) is waited out for as long as the caller's context allows,
// each wait told to OnPreparing.
type HTTPCatalog struct {
	c *client.Client
	// OnPreparing, when set, hears what the server still builds (its
	// message) at the first PREPARING answer, when that changes, and every
	// preparingNoteEvery while it lasts.
	OnPreparing func(msg string)
	// preparingPause is the wait between tries while the server prepares.
	preparingPause time.Duration
}

// preparingNoteEvery is how often an unchanged "still preparing" is told.
const preparingNoteEvery = 10 * time.Second

// NewHTTPCatalog reads the server at baseURL, sending token (if any) as
// a Bearer token.
func NewHTTPCatalog(baseURL, token string) (*HTTPCatalog, error) {
	u, err := ServerURL(baseURL)
	if err != nil {
		return nil, err
	}
	c, err := client.New(u, client.Options{Token: token, MaxReplyBytes: 256 << 20})
	if err != nil {
		return nil, err
	}
	return &HTTPCatalog{c: c, preparingPause: 2 * time.Second}, nil
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
	var splits []client.Split
	err := c.wait(ctx, "/splits", time.Minute, func(ctx context.Context) (err error) {
		splits, err = c.c.Splits(ctx)
		return err
	})
	out := make([]Split, len(splits))
	for i, s := range splits {
		out[i] = Split(s)
	}
	return out, catalogErr("/splits", err)
}

// Tasks implements Catalog.
func (c *HTTPCatalog) Tasks(ctx context.Context, split string, start, stop int) ([]TaskEntry, error) {
	var page client.TaskPage
	err := c.wait(ctx, "/splits/"+split+"/tasks", time.Minute, func(ctx context.Context) (err error) {
		page, err = c.c.Tasks(ctx, split, start, stop)
		return err
	})
	out := make([]TaskEntry, len(page.Tasks))
	for i, t := range page.Tasks {
		out[i] = TaskEntry(t)
	}
	return out, catalogErr("/splits/"+split+"/tasks", err)
}

// Task implements Catalog.
func (c *HTTPCatalog) Task(ctx context.Context, id string) (Task, error) {
	var info client.TaskInfo
	err := c.wait(ctx, "/tasks/"+id, time.Minute, func(ctx context.Context) (err error) {
		info, err = c.c.Task(ctx, id)
		return err
	})
	if err != nil {
		return Task{}, catalogErr("/tasks/"+id, err)
	}
	t := Task{TaskID: info.TaskID, Toolset: info.Toolset, Prompt: make([]Message, len(info.Prompt))}
	for i, m := range info.Prompt {
		t.Prompt[i] = Message{Role: m.Role, Content: m.Content}
	}
	return t, nil
}

// Tools implements Catalog: the tools as the server sent them.
func (c *HTTPCatalog) Tools(ctx context.Context, toolset string) (json.RawMessage, error) {
	// The server bounds deploying an env to list them at 5 minutes.
	var tools json.RawMessage
	err := c.wait(ctx, "/toolsets/"+toolset+"/tools", 6*time.Minute, func(ctx context.Context) (err error) {
		tools, err = c.c.ToolsetToolsJSON(ctx, toolset)
		return err
	})
	return tools, catalogErr("/toolsets/"+toolset+"/tools", err)
}

// BundleName is the served bundle's name, from GET /metadata.
func (c *HTTPCatalog) BundleName(ctx context.Context) (string, error) {
	var m client.Metadata
	err := c.wait(ctx, "/metadata", time.Minute, func(ctx context.Context) (err error) {
		m, err = c.c.Metadata(ctx)
		return err
	})
	return m.Name, catalogErr("/metadata", err)
}

// wait makes call, each try bounded to d, and tries again while the
// server answers PREPARING, for as long as ctx allows.
func (c *HTTPCatalog) wait(ctx context.Context, path string, d time.Duration, call func(context.Context) error) error {
	var told string
	var toldAt time.Time
	for {
		tctx, cancel := within(ctx, d)
		err := call(tctx)
		cancel()
		var e *client.Error
		if !errors.Is(err, client.CodePreparing) || !errors.As(err, &e) {
			return err
		}
		if c.OnPreparing != nil && (e.Message != told || time.Since(toldAt) >= preparingNoteEvery) {
			c.OnPreparing(e.Message)
			told, toldAt = e.Message, time.Now()
		}
		t := time.NewTimer(c.preparingPause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("GET %s: gave up waiting for the server to finish preparing (%w): %s", path, ctx.Err(), e.Message)
		case <-t.C:
		}
	}
}

// within bounds a call to d without setting a deadline on ctx: with one,
// the client waits out a server that is not up, and a rows writer pointed
// at the wrong address should hear so at once.
func within(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	t := time.AfterFunc(d, cancel)
	return ctx, func() { t.Stop(); cancel() }
}

// catalogErr words the client's errors for the writer: a refused token
// is ErrUnauthorized and a failed deploy ErrDeploy, each with what the
// server said.
func catalogErr(path string, err error) error {
	var e *client.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, client.CodeUnauthorized):
		return fmt.Errorf("GET %s: %w", path, ErrUnauthorized)
	case errors.Is(err, client.CodeDeployFailed) && errors.As(err, &e):
		return fmt.Errorf("%w: %s", ErrDeploy, e.Message)
	}
	return err
}
