package envclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// The lean connect. Through the SDK a connect is two requests
// (initialize, notifications/initialized) but a session's worth of
// machinery: a connection object with its reader goroutine, a goroutine
// per POST, and every answer decoded by a fresh 32 KiB decoder (about a
// third of what serve allocated per fresh rollout once calls and listing
// were lean). Where the env answers initialize with a protocol version the
// lean client speaks (leanVersions), the whole session is lean: initialize,
// initialized, tools/list, tools/call, ping and the closing DELETE, on one
// HTTP client. Any other answer ends that session and the SDK connects
// instead, as it would have; so does a listing the lean client leaves to
// the SDK (errSDKList), on a session of its own opened then.
// TestLeanConnectConformance holds it to the SDK's connect.

// errSDKConnect marks an env whose initialize answer the lean client
// leaves to the SDK.
var errSDKConnect = errors.New("connect left to the SDK")

// closeTimeout bounds the session's DELETE, as the SDK's Close does.
const closeTimeout = 5 * time.Second

// initializeParams is what the lean connect proposes. Its capabilities
// are none: the lean client answers no request of the server's (roots,
// sampling, elicitation), so it declares none.
type initializeParams struct {
	ProtocolVersion string   `json:"protocolVersion"`
	Capabilities    struct{} `json:"capabilities"`
	ClientInfo      struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"clientInfo"`
}

// leanConnect opens a lean session with the env at url, or returns
// errSDKConnect for an env whose answer the SDK must take.
func leanConnect(ctx context.Context, url string, opts Options, hc *http.Client) (*lean, error) {
	l := &lean{http: hc}
	params := initializeParams{ProtocolVersion: proposedVersion}
	params.ClientInfo.Name, params.ClientInfo.Version = opts.ClientName, "1"
	raw, sid, err := l.exchange(ctx, url, "initialize", params)
	if err != nil {
		return nil, err
	}
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("calling %q: reading the result: %w", "initialize", err)
	}
	l.sessionID, l.version = sid, res.ProtocolVersion
	if !leanVersions[res.ProtocolVersion] {
		// A version the lean client does not speak: end what it opened,
		// and let the SDK connect.
		l.end(url)
		return nil, errSDKConnect
	}
	if err := l.notify(ctx, url, "notifications/initialized"); err != nil {
		l.end(url)
		return nil, err
	}
	return l, nil
}

// notify sends a notification on the session; the server accepts it with
// no answer.
func (l *lean) notify(ctx context.Context, endpoint, method string) error {
	resp, err := l.post(ctx, endpoint, method, "", struct{}{})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return statusError(resp, method)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return nil
}

// ping is an MCP ping on the session.
func (l *lean) ping(ctx context.Context, endpoint string) error {
	_, err := l.rpc(ctx, endpoint, "ping", struct{}{})
	return err
}

// end deletes the session on the env (bounded by closeTimeout): what the
// SDK's Close sends.
func (l *lean) end(endpoint string) error {
	if l.sessionID == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, endpoint, nil)
	if err != nil {
		return err
	}
	l.setHeaders(req)
	resp, err := l.http.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}
