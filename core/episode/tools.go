package episode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// endTurnSchema is the arguments schema of end_turn.
const endTurnSchema = `{"type":"object","properties":{"answer":{"type":"string","description":"Your answer for this turn."}},"required":["answer"]}`

const endTurnDescription = "End this turn. Its answer argument is your answer for the turn; its result is the next prompt."

// offered is a tool offered to the model in a turn.
type offered struct {
	tool Tool
	env  *liveEnv // nil for end_turn

	once   sync.Once
	schema *jsonschema.Schema // nil when the schema could not be compiled
}

// compiledSchemas keeps tool schemas compiled across episodes: a task's
// tools are the same each episode, and compiling a schema costs several
// times what checking a call against it does.
var compiledSchemas = &schemaCache{m: map[string]*jsonschema.Schema{}}

// Bounds of compiledSchemas; past either it starts over.
const (
	maxCompiledSchemas     = 1024
	maxCompiledSchemaBytes = 32 << 20
)

// schemaCache holds compiled schemas by tool name and schema text (the
// name is in the schema's URL, which its errors may show); nil = the
// schema does not compile.
type schemaCache struct {
	mu    sync.Mutex
	m     map[string]*jsonschema.Schema
	bytes int
}

func (c *schemaCache) get(name string, params json.RawMessage) *jsonschema.Schema {
	key := name + "\x00" + string(params)
	c.mu.Lock()
	s, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return s
	}
	s = compileSchema(name, params)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCompiledSchemas || c.bytes+len(key) > maxCompiledSchemaBytes {
		c.m, c.bytes = map[string]*jsonschema.Schema{}, 0
	}
	if _, ok := c.m[key]; !ok {
		c.bytes += len(key)
	}
	c.m[key] = s
	return s
}

// compileSchema compiles a tool's schema; nil if it does not compile.
func compileSchema(name string, params json.RawMessage) *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return nil
	}
	c := jsonschema.NewCompiler()
	// A tool's schema comes from the env: its $refs must not make the
	// engine read files or fetch URLs on the host.
	c.UseLoader(refusingLoader{})
	url := "urn:agentenv:tool:" + name
	if c.AddResource(url, doc) != nil {
		return nil
	}
	s, _ := c.Compile(url)
	return s
}

// refusingLoader loads nothing: only $refs inside the schema itself resolve.
type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("tool schema $ref %q: only references within the schema are followed", url)
}

// validate checks a call's arguments (a JSON object) against the tool's
// schema and returns the text to send: args themselves (the value checked
// is the value sent, byte for byte but whitespace), {} for none. A schema
// the validator cannot compile is not enforced: the env still checks.
func (o *offered) validate(args json.RawMessage) (json.RawMessage, error) {
	o.once.Do(func() { o.schema = compiledSchemas.get(o.tool.Name, o.tool.Parameters) })
	var inst any
	decErr := io.EOF
	if len(args) > 0 {
		// Numbers stay json.Number: exact for the schema, and sent as written.
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.UseNumber()
		decErr = dec.Decode(&inst)
	}
	send := json.RawMessage("{}")
	if len(args) > 0 && string(args) != "null" {
		obj, ok := inst.(map[string]any)
		if decErr != nil || !ok {
			return nil, fmt.Errorf("arguments are not a JSON object that can be sent: %v", orNotObject(decErr))
		}
		// A number past float64 passes a schema but no env can read it: the
		// model's error, not the env's.
		if err := finiteNumbers(obj); err != nil {
			return nil, fmt.Errorf("arguments are not a JSON object that can be sent: %w", err)
		}
		send = args
		if !utf8.Valid(args) {
			// Sent as decoded (each bad byte as U+FFFD), not as bytes an
			// env's JSON reader may refuse.
			var err error
			if send, err = json.Marshal(obj); err != nil {
				return nil, fmt.Errorf("arguments are not a JSON object that can be sent: %w", err)
			}
		}
	}
	if o.schema == nil {
		return send, nil
	}
	if decErr != nil {
		return nil, fmt.Errorf("arguments are not JSON: %w", decErr)
	}
	if err := o.schema.Validate(inst); err != nil {
		return nil, schemaError(err)
	}
	return send, nil
}

func orNotObject(err error) error {
	if err != nil {
		return err
	}
	return errors.New("not an object")
}

// finiteNumbers checks that every number in v fits a float64.
func finiteNumbers(v any) error {
	switch x := v.(type) {
	case json.Number:
		if _, err := x.Float64(); err != nil {
			return fmt.Errorf("number %s: %w", clip(string(x), 40), err)
		}
	case map[string]any:
		for _, e := range x {
			if err := finiteNumbers(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := finiteNumbers(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// offerTools works out the tools of a turn: explicit (names) or, when
// names is nil, every tool of the deployed envs minus hidden ("env/tool"),
// plus end_turn for multi-turn tasks.
func offerTools(names []string, hidden []string, envs []*liveEnv, endTurn bool) ([]*offered, error) {
	serving := map[string][]*liveEnv{}
	descs := map[string]map[string]Tool{}
	for _, le := range envs {
		descs[le.name] = map[string]Tool{}
		for _, t := range le.tools {
			serving[t.Name] = append(serving[t.Name], le)
			descs[le.name][t.Name] = t
		}
	}
	isHidden := map[string]bool{}
	for _, h := range hidden {
		isHidden[h] = true
	}
	var out []*offered
	add := func(name string) error {
		les := serving[name]
		if len(les) == 0 {
			return fmt.Errorf("tool %q is not served by %s (it serves: %s)", name, envNames(envs), strings.Join(toolNames(envs), ", "))
		}
		if len(les) > 1 {
			return fmt.Errorf("tool %q is served by several envs (%s); tools must have one owner", name, envNames(les))
		}
		out = append(out, &offered{env: les[0], tool: descs[les[0].name][name]})
		return nil
	}
	if names != nil {
		for _, n := range names {
			if err := add(n); err != nil {
				return nil, err
			}
		}
	} else {
		for _, le := range envs {
			for _, t := range le.tools {
				if isHidden[le.name+"/"+t.Name] {
					continue
				}
				if err := add(t.Name); err != nil {
					return nil, err
				}
			}
		}
	}
	if endTurn {
		if len(serving[bundle.EndTurnTool]) > 0 {
			return nil, fmt.Errorf("env %s serves a tool named %q, which multi-turn tasks reserve", envNames(serving[bundle.EndTurnTool]), bundle.EndTurnTool)
		}
		out = append(out, &offered{tool: Tool{
			Name: bundle.EndTurnTool, Description: endTurnDescription, Parameters: json.RawMessage(endTurnSchema),
		}})
	}
	return out, nil
}

func envNames(envs []*liveEnv) string {
	names := make([]string, len(envs))
	for i, le := range envs {
		names[i] = "env " + le.name
	}
	return strings.Join(names, ", ")
}

func toolNames(envs []*liveEnv) []string {
	var names []string
	for _, le := range envs {
		for _, t := range le.tools {
			names = append(names, t.Name)
		}
	}
	return names
}

func toolsOf(offer []*offered) []Tool {
	out := make([]Tool, len(offer))
	for i, o := range offer {
		out[i] = o.tool
	}
	return out
}

// toolsetEntry caches one toolset's tools; its mutex makes concurrent
// first calls deploy once.
type toolsetEntry struct {
	mu    sync.Mutex
	tools []Tool
	// Once a listing has failed toolsetFailsRemembered times in a row the
	// failure is remembered for ToolsetRetryAfter: catalogue GETs of a
	// broken toolset would otherwise deploy its envs each time. The
	// first failures are not: a client replaying a rollout after a
	// passing fault (eval, SkyRL's generator) deserves a fresh try.
	fails    int
	err      error
	failedAt time.Time
}

// toolsetFailsRemembered is how many failed listings in a row make the
// failure remembered.
const toolsetFailsRemembered = 3

// Tools returns the tools a toolset offers the model: the union over its
// turns, in order of first appearance (end_turn last). The first call
// deploys the toolset's envs once to list their tools; later calls are
// served from the cache.
func (e *Engine) Tools(ctx context.Context, toolset string) ([]Tool, error) {
	ts, err := e.cfg.Bundle.Toolset(toolset)
	if err != nil {
		return nil, &Error{Code: CodeNotFound, Err: err}
	}
	e.toolsMu.Lock()
	entry := e.tools[toolset]
	if entry == nil {
		entry = &toolsetEntry{}
		e.tools[toolset] = entry
	}
	e.toolsMu.Unlock()
	entry.mu.Lock()
	defer entry.mu.Unlock()
	if entry.tools != nil {
		return append([]Tool(nil), entry.tools...), nil
	}
	if entry.err != nil {
		if left := e.cfg.ToolsetRetryAfter - time.Since(entry.failedAt); left > 0 {
			cause := entry.err
			var epErr *Error
			if errors.As(cause, &epErr) && epErr.Err != nil {
				cause = epErr.Err
			}
			return nil, &Error{Code: CodeOf(entry.err), Err: fmt.Errorf("%w (this listing failed %s ago; it is tried again in %s)",
				cause, time.Since(entry.failedAt).Round(time.Second), left.Round(time.Second))}
		}
		entry.err = nil
		entry.fails = toolsetFailsRemembered - 1 // one more failure and it is remembered again
	}
	tools, err := e.listToolset(ctx, ts)
	if err != nil {
		if ctx.Err() == nil { // a caller that left proves nothing of the toolset
			if entry.fails++; entry.fails >= toolsetFailsRemembered {
				entry.err, entry.failedAt = err, time.Now()
			}
		}
		return nil, err
	}
	entry.tools, entry.fails = tools, 0
	return append([]Tool(nil), tools...), nil
}

func (e *Engine) listToolset(ctx context.Context, ts *bundle.Toolset) (tools []Tool, err error) {
	labels := map[string]string{sandbox.LabelEpisode: "toolset-" + ts.ID, sandbox.LabelTask: ts.Task.ID}
	var envs []*liveEnv
	defer func() {
		if terr := <-e.retire(envs).done; terr != nil {
			e.log.Error("tearing down toolset envs", "toolset", ts.ID, "error", terr)
		}
	}()
	for _, name := range ts.Envs {
		le, err := e.deployEnv(ctx, name, labels, nil)
		if err != nil {
			err = fmt.Errorf("toolset %s (task %s): %w", ts.ID, ts.Task.ID, err)
			var b *briefError
			if errors.As(err, &b) {
				err = withBrief(err, "toolset %s: %s", ts.ID, b.brief)
			}
			return nil, &Error{Code: CodeDeploy, Err: err}
		}
		envs = append(envs, le)
	}
	seen := map[string]bool{}
	var endTurn *Tool
	for _, names := range ts.Turns {
		offer, err := offerTools(names, ts.Hidden, envs, ts.EndTurn)
		if err != nil {
			return nil, &Error{Code: CodeDeploy, Err: fmt.Errorf("toolset %s (task %s): %w", ts.ID, ts.Task.ID, err)}
		}
		for _, o := range offer {
			if o.env == nil { // end_turn goes last
				endTurn = &o.tool
				continue
			}
			if !seen[o.tool.Name] {
				seen[o.tool.Name] = true
				tools = append(tools, o.tool)
			}
		}
	}
	if endTurn != nil {
		tools = append(tools, *endTurn)
	}
	if tools == nil {
		tools = []Tool{}
	}
	return tools, nil
}

func sortStrings(s []string) { sort.Strings(s) }
