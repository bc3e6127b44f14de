package envclient

import "context"

// ConnectSDK connects a client that makes every tool call through the
// SDK's session: the reference the lean call is held to.
func ConnectSDK(ctx context.Context, endpoint string, opts Options) (*Client, error) {
	opts.sdkCalls = true
	return Connect(ctx, endpoint, opts)
}

// Lean says whether the client makes tool calls on the lean path.
func (c *Client) Lean() bool { return c.lean != nil }
