package eval

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// endpoint is a stand-in model endpoint: answer writes each answer, and
// the requests are kept.
type endpoint struct {
	srv    *httptest.Server
	n      atomic.Int32
	bodies chan map[string]json.RawMessage
	auth   chan string
}

func newEndpoint(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *endpoint {
	t.Helper()
	e := &endpoint{bodies: make(chan map[string]json.RawMessage, 16), auth: make(chan string, 16)}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
			http.Error(w, "wrong route "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		var body map[string]json.RawMessage
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &body)
		select {
		case e.bodies <- body:
		default:
		}
		select {
		case e.auth <- r.Header.Get("Authorization"):
		default:
		}
		answer(int(e.n.Add(1)), w, r)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func completionJSON(content string) string {
	b, _ := json.Marshal(content)
	return `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":` + string(b) +
		`},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`
}

func TestOpenAIComplete(t *testing.T) {
	temp := 1.1
	for _, c := range []struct {
		name    string
		opts    func(*OpenAIOptions)
		answer  func(n int, w http.ResponseWriter, r *http.Request)
		want    Reply
		wantErr string // substring; "" for success
		status  int
		tries   int32
	}{
		{
			name: "a reply, the request as sent",
			opts: func(o *OpenAIOptions) {
				o.Temperature, o.MaxTokens, o.APIKey = &temp, 64, "sk-test"
				o.ChatTemplateKwargs = json.RawMessage(`{"enable_thinking": false}`)
				o.Extra = json.RawMessage(`{"top_p": 0.9}`)
			},
			answer: func(_ int, w http.ResponseWriter, _ *http.Request) {
				io.WriteString(w, completionJSON("<tool_call>\n{}\n</tool_call>"))
			},
			want:  Reply{Text: "<tool_call>\n{}\n</tool_call>", FinishReason: "stop", PromptTokens: 12, CompletionTokens: 5},
			tries: 1,
		},
		{
			name: "reasoning split off by the endpoint is put back",
			answer: func(_ int, w http.ResponseWriter, _ *http.Request) {
				io.WriteString(w, `{"choices":[{"message":{"content":"ok","reasoning_content":"hmm"},"finish_reason":"length"}]}`)
			},
			want:  Reply{Text: "<think>\nhmm\n</think>\n\nok", FinishReason: "length"},
			tries: 1,
		},
		{
			name: "an error answer is not retried",
			answer: func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, `{"error":{"message":"This model's maximum context length is 8192 tokens","type":"BadRequestError","code":400}}`)
			},
			wantErr: "model endpoint: HTTP 400: This model's maximum context length is 8192 tokens", status: 400, tries: 1,
		},
		{
			name: "a 503 is retried",
			answer: func(n int, w http.ResponseWriter, _ *http.Request) {
				if n < 3 {
					http.Error(w, "loading", http.StatusServiceUnavailable)
					return
				}
				io.WriteString(w, completionJSON("fine"))
			},
			want: Reply{Text: "fine", FinishReason: "stop", PromptTokens: 12, CompletionTokens: 5}, tries: 3,
		},
		{
			name: "a 503 past the retries",
			answer: func(_ int, w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "loading", http.StatusServiceUnavailable)
			},
			wantErr: `HTTP 503: "loading"`, status: 503, tries: 3,
		},
		{
			name:    "garbage",
			answer:  func(_ int, w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "<html>proxy says hi</html>") },
			wantErr: `the answer is not a chat completion (invalid character '<' looking for beginning of value): "<html>proxy says hi</html>"`, status: 200, tries: 1,
		},
		{
			name:    "no choices",
			answer:  func(_ int, w http.ResponseWriter, _ *http.Request) { io.WriteString(w, `{"choices":[]}`) },
			wantErr: `the answer has no choices[0].message`, status: 200, tries: 1,
		},
		{
			name: "null content",
			answer: func(_ int, w http.ResponseWriter, _ *http.Request) {
				io.WriteString(w, `{"choices":[{"message":{"content":null}}]}`)
			},
			wantErr: `choices[0].message has no content`, status: 200, tries: 1,
		},
		{
			name: "tool calls parsed by the endpoint",
			answer: func(_ int, w http.ResponseWriter, _ *http.Request) {
				io.WriteString(w, `{"choices":[{"message":{"content":null,"tool_calls":[{"id":"1"}]}}]}`)
			},
			wantErr: "serve the model without --enable-auto-tool-choice", status: 200, tries: 1,
		},
		{
			name: "a timeout",
			opts: func(o *OpenAIOptions) { o.Timeout = 100 * time.Millisecond },
			answer: func(_ int, w http.ResponseWriter, r *http.Request) {
				<-r.Context().Done()
			},
			wantErr: "model endpoint: no answer within 100ms (--model-timeout)", tries: 1,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEndpoint(t, c.answer)
			o := OpenAIOptions{URL: e.srv.URL + "/v1/", Model: "m", Retries: 2}
			if c.opts != nil {
				c.opts(&o)
			}
			m, err := NewOpenAI(o)
			if err != nil {
				t.Fatal(err)
			}
			msgs := []Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}}
			got, err := m.Complete(context.Background(), msgs)
			if c.wantErr == "" {
				if err != nil || got != c.want {
					t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
				}
			} else {
				var me *ModelError
				if !errors.As(err, &me) || !strings.Contains(err.Error(), c.wantErr) || me.Status != c.status {
					t.Fatalf("err %v (%#v), want a ModelError with status %d saying %q", err, me, c.status, c.wantErr)
				}
			}
			if n := e.n.Load(); n != c.tries {
				t.Errorf("%d requests, want %d", n, c.tries)
			}
			body := <-e.bodies
			var sent []Message
			if json.Unmarshal(body["messages"], &sent) != nil || len(sent) != 2 || sent[1] != msgs[1] {
				t.Errorf("messages sent: %s", body["messages"])
			}
			if string(body["model"]) != `"m"` || string(body["stream"]) != "false" {
				t.Errorf("model %s stream %s", body["model"], body["stream"])
			}
			if _, ok := body["tools"]; ok {
				t.Error("tools sent")
			}
			if c.name == "a reply, the request as sent" {
				if string(body["temperature"]) != "1.1" || string(body["max_tokens"]) != "64" || string(body["top_p"]) != "0.9" ||
					string(body["chat_template_kwargs"]) != `{"enable_thinking":false}` {
					t.Errorf("sampling fields: %v", body)
				}
				if a := <-e.auth; a != "Bearer sk-test" {
					t.Errorf("Authorization %q", a)
				}
			} else {
				for _, k := range []string{"temperature", "max_tokens", "chat_template_kwargs"} {
					if _, ok := body[k]; ok {
						t.Errorf("%s sent though not set", k)
					}
				}
				if a := <-e.auth; a != "" {
					t.Errorf("Authorization %q without a key", a)
				}
			}
		})
	}
}

func TestOpenAIRefusals(t *testing.T) {
	for _, c := range []struct {
		o    OpenAIOptions
		want string
	}{
		{OpenAIOptions{URL: "127.0.0.1:8000", Model: "m"}, "--model-url: want the API's base URL"},
		{OpenAIOptions{URL: "http://h/v1"}, "--model: want the model's name"},
		{OpenAIOptions{URL: "http://h/v1", Model: "m", Extra: json.RawMessage(`[1]`)}, "--extra-body: want a JSON object"},
		{OpenAIOptions{URL: "http://h/v1", Model: "m", Extra: json.RawMessage(`{"messages": []}`)}, `--extra-body: "messages" is eval's to set`},
	} {
		if _, err := NewOpenAI(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
	// A URL naming the route itself is taken as it is.
	m, err := NewOpenAI(OpenAIOptions{URL: "http://h:1/v1/chat/completions", Model: "m"})
	if err != nil || m.url != "http://h:1/v1/chat/completions" {
		t.Fatalf("%v %v", m, err)
	}
}

// A refused connection is retried, then reported as the model's.
func TestOpenAIRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	m, err := NewOpenAI(OpenAIOptions{URL: url + "/v1", Model: "m", Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Complete(context.Background(), nil)
	var me *ModelError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("%v", err)
	}
}

// peakRSS is this process's peak resident memory (VmHWM), in bytes.
func peakRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// Answers over MaxAnswerBytes are refused after reading at most that
// much (one that says its length, before reading any), so oversized
// answers in flight cost a few times the bound each, not 113 MB as
// under the old 64 MiB bound.
func TestOpenAIOversizedAnswersAreBounded(t *testing.T) {
	chunk := []byte(`{"choices": [{"message": {"content": "` + strings.Repeat("x", 1<<20))
	e := newEndpoint(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.Header().Set("Content-Length", strconv.Itoa(1<<30))
		}
		for i := 0; i < 256; i++ { // 256 MiB, until the client goes
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	m, err := NewOpenAI(OpenAIOptions{URL: e.srv.URL + "/v1", Model: "m", Concurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Complete(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "the answer is 1073741824 bytes, over the bound of 4194304") {
		t.Fatalf("a 1 GiB Content-Length: %v", err)
	}
	runtime.GC()
	before := peakRSS(t)
	errs := make(chan error, 8)
	for range 8 {
		go func() { _, err := m.Complete(context.Background(), nil); errs <- err }()
	}
	for range 8 {
		if err := <-errs; err == nil || !strings.Contains(err.Error(), "the answer is over 4194304 bytes: lower max_tokens, or raise --max-answer-bytes") {
			t.Errorf("an endless answer: %v", err)
		}
	}
	limit := int64(200 << 20) // the old bound took 8 × 113 MB
	if raceEnabled {
		limit *= 5 // the race detector's shadow memory
	}
	if grown := peakRSS(t) - before; grown > limit {
		t.Errorf("8 oversized answers in flight raised the peak memory by %d MiB", grown>>20)
	}
}
