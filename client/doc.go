// Package client speaks the agentenv server's protocol: the OpenEnv
// session WebSocket (/ws) on which episodes are reset and stepped, and the
// HTTP task catalogue (/health, /splits, /tasks, /toolsets). The protocol
// itself is described in docs/protocol.md and docs/serving.md; this
// package is its Go binding, used by `agentenv play` and the benchmarks.
// It depends only on the standard library and gorilla/websocket, so a
// program that imports it pulls in nothing of the server.
//
// # Sessions
//
// Dial opens a Session; each Session plays one episode at a time:
//
//	sess, err := client.Dial(ctx, "http://127.0.0.1:8200", client.Options{Token: os.Getenv("AGENTENV_TOKEN")})
//	if err != nil { ... }
//	defer sess.Close()
//	res, err := sess.Reset(ctx, client.ResetRequest{Split: "eval", Index: 3})
//	for !res.Done {
//		res, err = sess.Step(ctx, model(res.Observation.Messages))
//		...
//	}
//	fmt.Println(*res.Reward, res.Observation.Metrics)
//
// The URL is the server's base URL (http://host:8200, https:// behind a TLS
// proxy) or its /ws URL. The token goes out as "Authorization: Bearer
// <token>"; when Options.Token is empty, the password of the URL's
// userinfo is used instead (http://user:<token>@host:8200, as OpenEnv's
// Python client takes it). The token never appears in an error.
//
// A Session answers the server's pings and sends its own (Options.PingInterval),
// even while the caller is busy between calls (a model generating a long
// reply), so an open session stays alive however long the caller takes.
//
// # Errors
//
// An error answer of the server is an *Error carrying its wire code
// (Error.Code); test for a code with errors.Is:
//
//	if errors.Is(err, client.CodeNotFound) { ... }
//
// A connection that ends without an answer gives an error wrapping
// ErrDisconnected (with why: the server's close code and reason, a lost
// network, unanswered pings). Calls on a closed Session return ErrClosed.
//
// # Waiting out a busy or restarting server
//
// When ctx has a deadline, Dial, Client.Connect, Session.Reset and the
// catalogue methods wait out a server that is not ready: connection
// refused (restarting), HTTP 503 (draining, still building its envs:
// PREPARING), a bare 502/503/504 (a proxy in front of a restart),
// SHUTTING_DOWN (the session is redialled), and, for Reset,
// CAPACITY_REACHED. A 5xx the server sent with a code (DEPLOY_FAILED) is
// returned at once. They retry with capped exponential backoff and jitter
// until ctx ends, then return an error that wraps both ctx's error and the
// last failure. With no deadline they try once, so a wrong address fails
// at once. A Reset also asks the server to queue it for a free slot until
// shortly before ctx's deadline (ResetRequest.Wait overrides), so a server
// at capacity serves it first-come first-served. Step and State are never
// retried: an episode does not survive its connection.
//
// # Concurrency and cancellation
//
// A Session is for one goroutine at a time: the protocol is strict request
// and reply. Play episodes in parallel with one Session per goroutine.
// Close, Done and Err may be called from any goroutine; Close makes a call
// in flight return ErrClosed. A Client is safe for concurrent use.
//
// Every call honours its context. A Step, State or Reset whose context
// ends before the answer closes the Session's connection (the answer
// would otherwise be read as the answer to the next call); the server then
// tears the episode down. The next Reset connects again.
package client
