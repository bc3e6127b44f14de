// Command parse reads tool-format parse requests as JSON lines on stdin,
// parses each with the tool-format plugin binary named for its format,
// started as the host starts it (go-plugin over gRPC), and writes one JSON
// line of results per request on stdout. vllmcheck.py uses it to compare
// the built plugins with vLLM's own parsers.
//
//	parse -plugin hermes=BIN -plugin qwen3_coder=BIN < requests.jsonl
//
// A request is {"id": ..., "format": ..., "reply": ..., "tools": [...]}
// with tools as {"name", "description", "parameters"}; a result is
// {"id", "content", "calls": [{"name", "arguments"}], "unparsed":
// [{"text", "reason"}]}.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/host"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

type request struct {
	ID     string `json:"id"`
	Format string `json:"format"`
	Reply  string `json:"reply"`
	Tools  []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"tools"`
}

type call struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type unparsed struct {
	Text   string `json:"text"`
	Reason string `json:"reason"`
}

type result struct {
	ID       string     `json:"id"`
	Content  string     `json:"content"`
	Calls    []call     `json:"calls"`
	Unparsed []unparsed `json:"unparsed"`
}

// plugins maps a format name to its binary (-plugin NAME=PATH, repeated).
type plugins map[string]string

func (p plugins) String() string { return fmt.Sprint(map[string]string(p)) }

func (p plugins) Set(v string) error {
	name, path, ok := strings.Cut(v, "=")
	if !ok || name == "" || path == "" {
		return fmt.Errorf("want NAME=PATH, got %q", v)
	}
	p[name] = path
	return nil
}

func main() {
	bins := plugins{}
	flag.Var(bins, "plugin", "a format and its plugin binary, as NAME=PATH (repeat for each format)")
	flag.Parse()
	if len(bins) == 0 {
		fmt.Fprintln(os.Stderr, "parse: no -plugin NAME=PATH given; build the plugins (go build ./cmd/...) and name them")
		os.Exit(2)
	}
	if err := run(bins, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "parse:", err)
		os.Exit(1)
	}
}

func run(bins plugins, in io.Reader, out io.Writer) error {
	parsers := map[string]*toolformat.Client{}
	for name, path := range bins {
		c, stop, err := launch(path)
		if err != nil {
			return fmt.Errorf("start the %s plugin %s: %w", name, path, err)
		}
		defer stop()
		parsers[name] = c
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 64<<20)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for line := 1; sc.Scan(); line++ {
		var req request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return fmt.Errorf("request on line %d: %w", line, err)
		}
		p, ok := parsers[req.Format]
		if !ok {
			return fmt.Errorf("request %q on line %d: no -plugin given for format %q", req.ID, line, req.Format)
		}
		var tools []toolformat.Tool
		for _, t := range req.Tools {
			tools = append(tools, toolformat.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		}
		got, err := p.Parse(context.Background(), req.Reply, tools)
		if err != nil {
			return fmt.Errorf("request %q on line %d: %w", req.ID, line, err)
		}
		res := result{ID: req.ID, Content: got.Content, Calls: []call{}, Unparsed: []unparsed{}}
		for _, c := range got.Calls {
			res.Calls = append(res.Calls, call{c.Name, c.Arguments})
		}
		for _, u := range got.Unparsed {
			res.Unparsed = append(res.Unparsed, unparsed{u.Text, u.Reason})
		}
		if err := enc.Encode(res); err != nil {
			return fmt.Errorf("write result for %q: %w", req.ID, err)
		}
	}
	return sc.Err()
}

// launch starts a plugin binary as the host does: go-plugin, gRPC only,
// AutoMTLS, the host's dial options.
func launch(path string) (*toolformat.Client, func(), error) {
	dir, err := os.MkdirTemp("", "vllmcheck-plugin-")
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(path)
	cmd.Env = append(os.Environ(), "PLUGIN_UNIX_SOCKET_DIR="+dir)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: host.PluginSets(),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		GRPCDialOptions:  host.DialOptions(),
		Logger:           hclog.New(&hclog.LoggerOptions{Name: filepath.Base(path), Output: os.Stderr, Level: hclog.Warn}),
	})
	stop := func() {
		client.Kill()
		_ = os.RemoveAll(dir)
	}
	rpc, err := client.Client()
	if err != nil {
		stop()
		return nil, nil, err
	}
	raw, err := rpc.Dispense(string(sdk.KindToolFormat))
	if err != nil {
		stop()
		return nil, nil, err
	}
	c, ok := raw.(*toolformat.Client)
	if !ok {
		stop()
		return nil, nil, errors.New("the plugin did not dispense a tool-format client")
	}
	return c, stop, nil
}
