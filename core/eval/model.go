package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Message is one chat message, as the endpoint and the SFT file take it.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Reply is the model's answer to one request.
type Reply struct {
	// Text is the reply as the model wrote it: the message's content, with
	// the reasoning put back in front when the endpoint split it off.
	Text string
	// FinishReason is the endpoint's: stop, length, ...
	FinishReason string
	// PromptTokens and CompletionTokens are the endpoint's usage; 0 when it
	// sent none.
	PromptTokens, CompletionTokens int
}

// Model answers a conversation with the model's next reply. It must be
// safe for concurrent use.
type Model interface {
	Complete(ctx context.Context, messages []Message) (Reply, error)
}

// ModelError is a request the model endpoint did not answer with a reply:
// an HTTP error, a timeout, or a body that is not a chat completion. It
// fails the rollout (the env did nothing wrong), and is not retried as a
// rollout.
type ModelError struct {
	// Status is the HTTP status; 0 when there was no answer.
	Status int
	Err    error
}

func (e *ModelError) Error() string { return "model endpoint: " + e.Err.Error() }
func (e *ModelError) Unwrap() error { return e.Err }

// OpenAIOptions configure an OpenAI-compatible chat endpoint.
type OpenAIOptions struct {
	// URL is the API's base (http://host:8000/v1); requests go to
	// URL/chat/completions. A URL already ending in /chat/completions is
	// taken as it is.
	URL string
	// Model is the request's model field: the name vLLM serves.
	Model string
	// APIKey, if set, is sent as a Bearer token.
	APIKey string
	// Temperature and MaxTokens are sent when set (nil, 0): otherwise the
	// endpoint's defaults hold (for vLLM, the model's generation config).
	Temperature *float64
	MaxTokens   int
	// ChatTemplateKwargs is sent as chat_template_kwargs (vLLM), as JSON.
	ChatTemplateKwargs json.RawMessage
	// Extra holds more request fields (top_p, seed, ...), as a JSON object.
	Extra json.RawMessage
	// Timeout bounds one request, retries apart. 0: 10 minutes.
	Timeout time.Duration
	// Retries is how many times a request is sent again after an answer
	// that says the endpoint is not ready (refused, reset, 429, 502, 503,
	// 504), as OpenAI's clients do. Other failures are not retried.
	Retries int
	// Concurrency sizes the connection pool.
	Concurrency int
	// MaxAnswerBytes bounds one answer's body, which is held whole to be
	// decoded: with Concurrency requests in flight, eval holds at most
	// about twice this for each. 0: DefaultMaxAnswerBytes.
	MaxAnswerBytes int64
}

// DefaultMaxAnswerBytes bounds an answer of the endpoint: a reply of
// 128k tokens (a whole long context) is under 1 MB of JSON.
const DefaultMaxAnswerBytes = 4 << 20

// maxErrorBytes bounds what is read of an error answer, for its message.
const maxErrorBytes = 64 << 10

// OpenAI is a Model behind an OpenAI-compatible /chat/completions
// endpoint (vLLM, SGLang, a proxy). It sends plain messages and no tools,
// so the reply's text comes back as the model wrote it.
type OpenAI struct {
	o      OpenAIOptions
	url    string
	fixed  map[string]json.RawMessage // the request's fields but messages
	client *http.Client
}

// NewOpenAI checks o and returns the endpoint's Model.
func NewOpenAI(o OpenAIOptions) (*OpenAI, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("--model-url: want the API's base URL, such as http://127.0.0.1:8000/v1")
	}
	if o.Model == "" {
		return nil, errors.New("--model: want the model's name as the endpoint serves it (vLLM's --served-model-name, or the path it was started with)")
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.MaxAnswerBytes <= 0 {
		o.MaxAnswerBytes = DefaultMaxAnswerBytes
	}
	full := strings.TrimSuffix(u.String(), "/")
	if !strings.HasSuffix(full, "/chat/completions") {
		full += "/chat/completions"
	}
	fixed := map[string]json.RawMessage{}
	if len(o.Extra) > 0 {
		if err := json.Unmarshal(o.Extra, &fixed); err != nil || fixed == nil {
			return nil, fmt.Errorf("--extra-body: want a JSON object such as {\"top_p\": 0.95}: %s", strings.TrimSpace(string(o.Extra)))
		}
		for _, k := range []string{"messages", "model", "stream", "tools", "n"} {
			if _, ok := fixed[k]; ok {
				return nil, fmt.Errorf("--extra-body: %q is eval's to set", k)
			}
		}
	}
	set := func(k string, v any) {
		b, _ := json.Marshal(v)
		fixed[k] = b
	}
	set("model", o.Model)
	set("stream", false)
	if o.Temperature != nil {
		set("temperature", *o.Temperature)
	}
	if o.MaxTokens > 0 {
		set("max_tokens", o.MaxTokens)
	}
	if len(o.ChatTemplateKwargs) > 0 {
		fixed["chat_template_kwargs"] = o.ChatTemplateKwargs
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = max(2, o.Concurrency)
	return &OpenAI{o: o, url: full, fixed: fixed, client: &http.Client{Transport: tr}}, nil
}

// Check asks the endpoint for its models (GET URL/models) and fails when
// nothing answers there (no server, a wrong host or port), so an eval
// does not deploy every rollout's env before finding out. Any HTTP answer
// passes: an endpoint without /models still serves completions.
func (m *OpenAI) Check(ctx context.Context) error {
	base := strings.TrimSuffix(m.url, "/chat/completions")
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/models", nil)
	if err != nil {
		return fmt.Errorf("--model-url %s: %w", m.o.URL, err)
	}
	if m.o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+m.o.APIKey)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return fmt.Errorf("the model endpoint at %s does not answer (%w): start the model server (e.g. vllm serve MODEL --port 8000) or check --model-url; no rollout was played", m.o.URL, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) //nolint:errcheck // only draining
	resp.Body.Close()
	return nil
}

// Complete implements Model.
func (m *OpenAI) Complete(ctx context.Context, messages []Message) (Reply, error) {
	fields := make(map[string]any, len(m.fixed)+1)
	for k, v := range m.fixed {
		fields[k] = v
	}
	fields["messages"] = messages
	body, err := json.Marshal(fields)
	if err != nil {
		return Reply{}, &ModelError{Err: err}
	}
	for try := 0; ; try++ {
		r, err := m.once(ctx, body)
		if err == nil || try >= m.o.Retries || !notReady(err) || ctx.Err() != nil {
			return r, err
		}
		wait := time.Duration(500<<try) * time.Millisecond
		wait = wait/2 + rand.N(wait/2)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return r, err
		case <-t.C:
		}
	}
}

func (m *OpenAI) once(parent context.Context, body []byte) (Reply, error) {
	ctx, cancel := context.WithTimeout(parent, m.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.url, bytes.NewReader(body))
	if err != nil {
		return Reply{}, &ModelError{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if m.o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+m.o.APIKey)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // it repeats the URL
		}
		if parent.Err() != nil {
			return Reply{}, parent.Err()
		}
		if ctx.Err() != nil {
			return Reply{}, &ModelError{Err: fmt.Errorf("no answer within %s (--model-timeout)", m.o.Timeout)}
		}
		return Reply{}, &ModelError{Err: err}
	}
	defer resp.Body.Close()
	limit := m.o.MaxAnswerBytes
	if resp.StatusCode != http.StatusOK {
		limit = maxErrorBytes // enough for its message
	} else if resp.ContentLength > limit {
		return Reply{}, m.tooBig(resp.StatusCode, resp.ContentLength)
	}
	raw, err := readAtMost(resp.Body, resp.ContentLength, limit)
	if err != nil {
		if parent.Err() != nil {
			return Reply{}, parent.Err()
		}
		if ctx.Err() != nil {
			return Reply{}, &ModelError{Status: resp.StatusCode, Err: fmt.Errorf("the answer did not finish within %s (--model-timeout)", m.o.Timeout)}
		}
		return Reply{}, &ModelError{Status: resp.StatusCode, Err: fmt.Errorf("reading the answer: %w", err)}
	}
	if resp.StatusCode == http.StatusOK && int64(len(raw)) > limit {
		return Reply{}, m.tooBig(resp.StatusCode, -1)
	}
	if resp.StatusCode != http.StatusOK {
		return Reply{}, &ModelError{Status: resp.StatusCode, Err: fmt.Errorf("HTTP %d: %s", resp.StatusCode, errorText(raw))}
	}
	return decodeCompletion(raw)
}

func (m *OpenAI) tooBig(status int, size int64) error {
	n := fmt.Sprintf("over %d bytes", m.o.MaxAnswerBytes)
	if size >= 0 {
		n = fmt.Sprintf("%d bytes, over the bound of %d", size, m.o.MaxAnswerBytes)
	}
	return &ModelError{Status: status, Err: fmt.Errorf("the answer is %s: lower max_tokens, or raise --max-answer-bytes", n)}
}

// readAtMost reads r up to limit+1 bytes, into a buffer sized by the
// answer's Content-Length when it has one (size >= 0), so that the body
// is not held twice while a doubling buffer grows past it.
func readAtMost(r io.Reader, size, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	if size >= 0 && size <= limit {
		buf.Grow(int(size) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	return buf.Bytes(), err
}

// completion is the part of a chat completion eval reads.
type completion struct {
	Choices []struct {
		Message *struct {
			Content *string `json:"content"`
			// vLLM and SGLang split the reasoning off with a reasoning
			// parser: reasoning_content (older), reasoning (newer).
			ReasoningContent *string          `json:"reasoning_content"`
			Reasoning        *string          `json:"reasoning"`
			ToolCalls        []map[string]any `json:"tool_calls"`
		} `json:"message"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func decodeCompletion(raw []byte) (Reply, error) {
	var c completion
	if err := json.Unmarshal(raw, &c); err != nil {
		return Reply{}, &ModelError{Status: http.StatusOK, Err: fmt.Errorf("the answer is not a chat completion (%v): %s", err, excerpt(raw))}
	}
	if len(c.Choices) == 0 || c.Choices[0].Message == nil {
		return Reply{}, &ModelError{Status: http.StatusOK, Err: fmt.Errorf("the answer has no choices[0].message: %s", excerpt(raw))}
	}
	msg := c.Choices[0].Message
	if len(msg.ToolCalls) > 0 {
		return Reply{}, &ModelError{Status: http.StatusOK, Err: errors.New("the endpoint read the tool calls itself (choices[0].message.tool_calls); serve the model without --enable-auto-tool-choice / --tool-call-parser so its text comes back as it wrote it")}
	}
	if msg.Content == nil {
		return Reply{}, &ModelError{Status: http.StatusOK, Err: fmt.Errorf("choices[0].message has no content: %s", excerpt(raw))}
	}
	r := Reply{Text: *msg.Content}
	reasoning := msg.ReasoningContent
	if reasoning == nil {
		reasoning = msg.Reasoning
	}
	if reasoning != nil && *reasoning != "" {
		// As Qwen3's template lays a reply out; serving without a reasoning
		// parser returns the model's own bytes.
		r.Text = "<think>\n" + *reasoning + "\n</think>\n\n" + r.Text
	}
	if c.Choices[0].FinishReason != nil {
		r.FinishReason = *c.Choices[0].FinishReason
	}
	if c.Usage != nil {
		r.PromptTokens, r.CompletionTokens = c.Usage.PromptTokens, c.Usage.CompletionTokens
	}
	return r, nil
}

// errorText is the message of an error answer: OpenAI's
// {"error": {"message"}}, vLLM's {"message"}, else the body's start.
func errorText(raw []byte) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  any             `json:"detail"`
	}
	if json.Unmarshal(raw, &e) == nil {
		var inner struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(e.Error, &inner) == nil && inner.Message != "":
			return inner.Message
		case json.Unmarshal(e.Error, &s) == nil && s != "":
			return s
		case e.Message != "":
			return e.Message
		case e.Detail != nil:
			return fmt.Sprint(e.Detail)
		}
	}
	return excerpt(raw)
}

func excerpt(raw []byte) string {
	s := strings.TrimSpace(string(raw))
	if s == "" {
		return "(empty body)"
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// notReady reports whether a failed request may succeed when sent again.
func notReady(err error) bool {
	var me *ModelError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case 0:
		var op *net.OpError
		return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) ||
			(errors.As(err, &op) && op.Op == "dial")
	}
	return false
}
