package rollout

import (
	"context"
	"fmt"
	"sort"

	"github.com/agentenv/agentenv/client"
)

// Message is one chat message of an observation.
type Message = client.Message

// Tool is a tool offered to the model, as an OpenAI function schema.
type Tool = client.Tool

// Observation is the server's answer to a reset or a step, with the
// episode's reward and done beside it.
type Observation struct {
	EpisodeID string
	TaskID    string
	Messages  []Message
	Tools     []Tool
	Turn      int
	Metrics   map[string]float64
	Reward    *float64
	Done      bool
}

func observation(r client.Result) Observation {
	o := r.Observation
	return Observation{EpisodeID: o.EpisodeID, TaskID: o.TaskID, Messages: o.Messages, Tools: o.Tools,
		Turn: o.Turn, Metrics: o.Metrics, Reward: r.Reward, Done: r.Done}
}

// Reset names the task to play and how.
type Reset struct {
	Split      string
	Index      int
	TaskID     string
	ToolFormat string
	MaxTurns   int
}

// Client is one WebSocket session, on agentenv's Go client (client/).
type Client struct{ s *client.Session }

// Dial opens a session on the server at base (http://127.0.0.1:8200), with
// token as a Bearer token when not empty.
func Dial(ctx context.Context, base, token string) (*Client, error) {
	s, err := client.Dial(ctx, base, client.Options{Token: token})
	if err != nil {
		return nil, err
	}
	return &Client{s: s}, nil
}

// Reset starts the episode r names.
func (c *Client) Reset(ctx context.Context, r Reset) (Observation, error) {
	res, err := c.s.Reset(ctx, client.ResetRequest{TaskID: r.TaskID, Split: r.Split, Index: r.Index,
		ToolFormat: r.ToolFormat, MaxTurns: r.MaxTurns})
	return observation(res), err
}

// Step sends one model reply.
func (c *Client) Step(ctx context.Context, reply string) (Observation, error) {
	res, err := c.s.Step(ctx, reply)
	return observation(res), err
}

// Close ends the session; the server tears down its episode.
func (c *Client) Close() error { return c.s.Close() }

// Tasks lists the task ids of a split from the server's catalogue, in
// index order.
func Tasks(ctx context.Context, base, token, split string) ([]string, error) {
	c, err := client.New(base, client.Options{Token: token})
	if err != nil {
		return nil, err
	}
	page, err := c.Tasks(ctx, split, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("listing split %s: %w", split, err)
	}
	sort.Slice(page.Tasks, func(i, j int) bool { return page.Tasks[i].Index < page.Tasks[j].Index })
	ids := make([]string, len(page.Tasks))
	for i, t := range page.Tasks {
		ids[i] = t.TaskID
	}
	return ids, nil
}
