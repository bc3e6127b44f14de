// Command testenv is a small env for agentenv's own tests: an MCP
// streamable-HTTP server at 127.0.0.1:$AGENTENV_PORT/mcp with a setup tool
// (load_puzzle), play tools (add, guess, echo, write_note, sleep, crash) and a
// grading tool (grade). Environment knobs make it fail in the ways the
// engine and sandboxes must survive:
//
//	TESTENV_FAIL_START=1    exit 2 before listening
//	TESTENV_SAY=s           print s to stderr first (an env that logs a secret)
//	TESTENV_START_DELAY=d   wait d (a Go duration) before listening
//	TESTENV_IGNORE_TERM=1   ignore SIGTERM, so only SIGKILL stops it
//	TESTENV_CHILD=1         start a child process (this binary, "child") in
//	                        the same process group, to test group teardown
//	TESTENV_GRADE_ERROR=1   grade reports a tool error
//	TESTENV_GRADE_TEXT=s    grade answers s instead of a number
//	TESTENV_PAGE_SIZE=n     list tools n per page
//	TESTENV_PREFIX=p        prefix every tool name with p (two envs in one task)
//	TESTENV_JSON_RESPONSE=1 answer calls with plain JSON bodies, not SSE streams
//	TESTENV_ECHO_ARGS=1     serve echo_args too: it answers with the arguments as received
//	TESTENV_HEADER_TOOL=1   serve region too, whose schema carries an x-mcp-header annotation
//	TESTENV_RESET_FAIL=m    the reset tool fails: m is error (a tool error), hang
//	                        (never answers) or crash (exits)
//	TESTENV_RESET_FAIL_FILE=f  as TESTENV_RESET_FAIL, m read from file f at each
//	                        reset (no file: the reset passes)
//
// With AGENTENV_RESET_TOOL set (agentenv sets it for an env.toml with
// reuse = N) and TESTENV_NO_RESET unset, it serves that reset tool: the puzzle is unloaded and the
// files the tools wrote are removed, so nothing crosses to the next episode.
//
// flood returns a result of any size (to test the limits on what an env
// sends back).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// puzzle is the env's state: reach target from start with add, or guess it.
type puzzle struct {
	mu      sync.Mutex
	loaded  bool
	target  int
	value   int
	guessed bool
}

type loadIn struct {
	Target int `json:"target" jsonschema:"the number to reach"`
	Start  int `json:"start,omitempty" jsonschema:"the starting value"`
}

type addIn struct {
	N int `json:"n" jsonschema:"how much to add (may be negative)"`
}

type guessIn struct {
	Value int `json:"value" jsonschema:"the guessed target"`
}

type echoIn struct {
	Text string `json:"text" jsonschema:"text to echo back"`
}

type noteIn struct {
	Text string `json:"text" jsonschema:"text written to note.txt in the env's working directory"`
}

type sleepIn struct {
	Seconds float64 `json:"seconds" jsonschema:"how long to sleep"`
}

type empty struct{}

type floodIn struct {
	Bytes int    `json:"bytes" jsonschema:"bytes of text in each part"`
	Parts int    `json:"parts,omitempty" jsonschema:"text parts (default 1)"`
	Char  string `json:"char,omitempty" jsonschema:"the text repeated (default x)"`
}

func text(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

func newServer(p *puzzle) *mcp.Server {
	opts := &mcp.ServerOptions{}
	if n, err := strconv.Atoi(os.Getenv("TESTENV_PAGE_SIZE")); err == nil && n > 0 {
		opts.PageSize = n
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "testenv", Version: "1"}, opts)
	prefix := os.Getenv("TESTENV_PREFIX")
	tool := func(name, desc string) *mcp.Tool { return &mcp.Tool{Name: prefix + name, Description: desc} }

	mcp.AddTool(s, tool("load_puzzle", "Set up the puzzle (setup step)."),
		func(_ context.Context, _ *mcp.CallToolRequest, in loadIn) (*mcp.CallToolResult, any, error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.loaded, p.target, p.value, p.guessed = true, in.Target, in.Start, false
			return text("puzzle loaded: start at %d", in.Start), nil, nil
		})
	mcp.AddTool(s, tool("add", "Add n to the current value; returns the new value."),
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			if !p.loaded {
				return nil, nil, errors.New("no puzzle loaded")
			}
			p.value += in.N
			// Written for command verifiers, which read the env's working dir.
			if err := os.WriteFile("value.txt", []byte(strconv.Itoa(p.value)), 0o644); err != nil {
				return nil, nil, err
			}
			return text("%d", p.value), nil, nil
		})
	mcp.AddTool(s, tool("guess", "Guess the target."),
		func(_ context.Context, _ *mcp.CallToolRequest, in guessIn) (*mcp.CallToolResult, any, error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			if !p.loaded {
				return nil, nil, errors.New("no puzzle loaded")
			}
			switch {
			case in.Value < p.target:
				return text("too low"), nil, nil
			case in.Value > p.target:
				return text("too high"), nil, nil
			}
			p.guessed = true
			return text("correct"), nil, nil
		})
	mcp.AddTool(s, tool("echo", "Echo text back."),
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return text("%s", in.Text), nil, nil
		})
	mcp.AddTool(s, tool("write_note", "Write text to note.txt."),
		func(_ context.Context, _ *mcp.CallToolRequest, in noteIn) (*mcp.CallToolResult, any, error) {
			if err := os.WriteFile("note.txt", []byte(in.Text), 0o644); err != nil {
				return nil, nil, err
			}
			return text("written"), nil, nil
		})
	mcp.AddTool(s, tool("sleep", "Sleep, then answer (to test deadlines)."),
		func(ctx context.Context, _ *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
			// Deliberately ignores ctx: a hung env does not listen to cancellation.
			time.Sleep(time.Duration(in.Seconds * float64(time.Second)))
			return text("slept"), nil, nil
		})
	mcp.AddTool(s, tool("crash", "Exit at once (to test env crashes)."),
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(s, tool("flood", "Return parts text parts of bytes bytes each."),
		func(_ context.Context, _ *mcp.CallToolRequest, in floodIn) (*mcp.CallToolResult, any, error) {
			parts, char := max(in.Parts, 1), in.Char
			if char == "" {
				char = "x"
			}
			part := strings.Repeat(char, max(in.Bytes, 0)/len(char))
			res := &mcp.CallToolResult{}
			for range parts {
				res.Content = append(res.Content, &mcp.TextContent{Text: part})
			}
			return res, nil, nil
		})
	mcp.AddTool(s, tool("grade", "Score the episode: 1 when the value or a guess hit the target, else 0."),
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			if os.Getenv("TESTENV_GRADE_ERROR") == "1" {
				return nil, nil, errors.New("grader broke")
			}
			if t := os.Getenv("TESTENV_GRADE_TEXT"); t != "" {
				return text("%s", t), nil, nil
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if !p.loaded {
				return nil, nil, errors.New("no puzzle loaded")
			}
			if p.guessed || p.value == p.target {
				return text("1"), nil, nil
			}
			return text("0"), nil, nil
		})
	if name := os.Getenv("AGENTENV_RESET_TOOL"); name != "" && os.Getenv("TESTENV_NO_RESET") != "1" {
		s.AddTool(&mcp.Tool{Name: name, Description: "Reset the env for the next episode.",
			InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				mode := os.Getenv("TESTENV_RESET_FAIL")
				if f := os.Getenv("TESTENV_RESET_FAIL_FILE"); f != "" {
					b, _ := os.ReadFile(f)
					mode = strings.TrimSpace(string(b))
				}
				switch mode {
				case "error":
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "reset broke"}}}, nil
				case "hang":
					select {} // deliberately deaf to cancellation, as a hung env is
				case "crash":
					os.Exit(4)
				}
				p.mu.Lock()
				defer p.mu.Unlock()
				p.loaded, p.target, p.value, p.guessed = false, 0, 0, false
				for _, f := range []string{"value.txt", "note.txt"} {
					if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
						return nil, err
					}
				}
				return text("reset"), nil
			})
	}
	if os.Getenv("TESTENV_ECHO_ARGS") == "1" {
		// The arguments as they arrived on the wire, byte for byte.
		s.AddTool(&mcp.Tool{Name: prefix + "echo_args", Description: "Answer with the call's arguments as received.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"number"}}}`)},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return text("%s", req.Params.Arguments), nil
			})
	}
	if os.Getenv("TESTENV_HEADER_TOOL") == "1" {
		// A listing the lean client leaves to the SDK (envclient).
		s.AddTool(&mcp.Tool{Name: prefix + "region", Description: "Answer with the region asked for.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return text("%s", req.Params.Arguments), nil
			})
	}
	return s
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		// A child that lives until its process group is killed.
		select {}
	}
	if say := os.Getenv("TESTENV_SAY"); say != "" {
		fmt.Fprintln(os.Stderr, say)
	}
	if os.Getenv("TESTENV_FAIL_START") == "1" {
		fmt.Fprintln(os.Stderr, "testenv: failing to start as asked (TESTENV_FAIL_START=1)")
		os.Exit(2)
	}
	if d, err := time.ParseDuration(os.Getenv("TESTENV_START_DELAY")); err == nil {
		time.Sleep(d)
	}
	if os.Getenv("TESTENV_IGNORE_TERM") == "1" {
		signal.Ignore(syscall.SIGTERM)
	}
	if os.Getenv("TESTENV_CHILD") == "1" {
		self, err := os.Executable()
		if err != nil {
			log.Fatalf("testenv: %v", err)
		}
		child := exec.Command(self, "child")
		if err := child.Start(); err != nil {
			log.Fatalf("testenv: starting child: %v", err)
		}
		fmt.Fprintf(os.Stderr, "testenv: child pid %d\n", child.Process.Pid)
	}
	port := os.Getenv("AGENTENV_PORT")
	if port == "" {
		port = "18765"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		log.Fatalf("testenv: %v", err)
	}
	p := &puzzle{}
	server := newServer(p)
	mux := http.NewServeMux()
	hopts := &mcp.StreamableHTTPOptions{JSONResponse: os.Getenv("TESTENV_JSON_RESPONSE") == "1"}
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, hopts))
	fmt.Fprintf(os.Stderr, "testenv: listening on %s\n", ln.Addr())
	if err := http.Serve(ln, mux); err != nil {
		log.Fatalf("testenv: %v", err)
	}
}
