package skyrl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/dataset/skyrl/oracles"
)

// wordCounter stands in for the model's tokenizer: a token a word.
type wordCounter struct{}

func (wordCounter) Count(s string) (int, error) { return len(strings.Fields(s)), nil }

// fakeServer serves a small catalogue over agentenv serve's endpoints:
// train has two tasks, eval one, all three; two toolsets.
type fakeServer struct {
	token       string
	deployFails string         // a toolset whose env fails to deploy
	toolsCalls  map[string]int // by toolset
	mu          sync.Mutex
	tools       map[string]string
	tasks       map[string]Task
	splits      map[string][]TaskEntry
	splitList   []Split // GET /splits
	wholeLists  bool    // send a split's whole list whatever the range asked
}

const oddTools = `[{"type": "function", "function": {"name": "tune", "description": "Tunes — 调整 <x>", "parameters": {"type": "object", "properties": {"gain": {"type": "number", "default": 1.0}, "mode": {"type": ["string", "null"], "default": null}}}}}]`

func newFakeServer(t *testing.T) (*fakeServer, *httptest.Server) {
	grid, err := os.ReadFile(filepath.Join("testdata", "gridsim_tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{
		toolsCalls: map[string]int{},
		tools:      map[string]string{"ts-grid": string(grid), "ts-odd": oddTools},
		tasks: map[string]Task{
			"day/train-001": {TaskID: "day/train-001", Toolset: "ts-grid", Prompt: []Message{{"system", "Run the battery."}, {"user", "Prices: 1 2 3."}}},
			"day/train-002": {TaskID: "day/train-002", Toolset: "ts-odd", Prompt: []Message{{"user", "Tune it, a long prompt " + strings.Repeat("word ", 200)}}},
			"day/eval-001":  {TaskID: "day/eval-001", Toolset: "ts-grid", Prompt: []Message{{"system", "Run the battery."}, {"user", "Prices: 4 5 6."}}},
		},
	}
	f.splits = map[string][]TaskEntry{
		"train": {{0, "day/train-001", "ts-grid"}, {1, "day/train-002", "ts-odd"}},
		"eval":  {{0, "day/eval-001", "ts-grid"}},
		"all":   {{0, "day/eval-001", "ts-grid"}, {1, "day/train-001", "ts-grid"}, {2, "day/train-002", "ts-odd"}},
	}
	f.splitList = []Split{{"all", 3}, {"eval", 1}, {"train", 2}}
	mux := http.NewServeMux()
	send := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(v)
	}
	auth := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
				send(w, 401, map[string]string{"detail": "missing or wrong token", "code": "UNAUTHORIZED"})
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("GET /metadata", auth(func(w http.ResponseWriter, r *http.Request) { send(w, 200, map[string]any{"name": "fakegrid"}) }))
	mux.HandleFunc("GET /splits", auth(func(w http.ResponseWriter, r *http.Request) {
		send(w, 200, map[string]any{"splits": f.splitList})
	}))
	mux.HandleFunc("GET /splits/{split}/tasks", auth(func(w http.ResponseWriter, r *http.Request) {
		list, ok := f.splits[r.PathValue("split")]
		if !ok {
			send(w, 404, map[string]string{"detail": "no split", "code": "NOT_FOUND"})
			return
		}
		start, _ := strconv.Atoi(r.URL.Query().Get("start"))
		stop, _ := strconv.Atoi(r.URL.Query().Get("stop"))
		if f.wholeLists {
			start, stop = 0, len(list)
		}
		send(w, 200, map[string]any{"size": len(list), "tasks": list[start:min(stop, len(list))]})
	}))
	mux.HandleFunc("GET /tasks/{id...}", auth(func(w http.ResponseWriter, r *http.Request) {
		task, ok := f.tasks[r.PathValue("id")]
		if !ok {
			send(w, 404, map[string]string{"detail": "no task", "code": "NOT_FOUND"})
			return
		}
		send(w, 200, task)
	}))
	mux.HandleFunc("GET /toolsets/{id}/tools", auth(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		f.mu.Lock()
		f.toolsCalls[id]++
		f.mu.Unlock()
		if id == f.deployFails {
			send(w, 502, map[string]string{"detail": `DEPLOY_FAILED: deploy_env step "env": env gridsim: process exited with status 1`, "code": "DEPLOY_FAILED"})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"toolset": %q, "tools": %s}`, id, f.tools[id])
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return f, srv
}

func testOptions(url string) Options {
	k, _ := ParseKwargs(`{"enable_thinking": false}`)
	return Options{ServerURL: url, Attempts: 3, ResetTimeout: 600, ToolFormat: "hermes", DataSource: "fakegrid", MaxPromptLength: 1000, Kwargs: k}
}

func TestWriteRows(t *testing.T) {
	f, srv := newFakeServer(t)
	f.token = "sekret-token-4411"
	tmpl := qwen3Template(t)
	cat, err := NewHTTPCatalog(srv.URL, f.token)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "data")
	// What a run killed mid-write left (writer pid gone): this run removes it.
	os.MkdirAll(out, 0o755)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(out, fmt.Sprintf(".all.parquet.tmp-%d-12345", dead.Process.Pid))
	if err := os.WriteFile(leftover, []byte("PAR1"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := testOptions(srv.URL + "/")
	o.TokenVar = "MY_TOKEN"
	var progress []int
	o.Progress = func(done, total int) { progress = append(progress, done*10+total) }
	res, err := Write(context.Background(), cat, tmpl, wordCounter{}, out, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 3 || res.Tasks != 3 || res.Toolsets != 2 || !reflect.DeepEqual(progress, []int{13, 23, 33}) {
		t.Fatalf("result %+v, progress %v", res, progress)
	}
	// Each toolset's tools were listed once (one env deploy each).
	if !reflect.DeepEqual(f.toolsCalls, map[string]int{"ts-grid": 1, "ts-odd": 1}) {
		t.Fatalf("tools listed %v", f.toolsCalls)
	}
	// The longest prompt, counted both ways: enable_thinking=false adds
	// "<think>\n\n</think>\n\n", two words to this counter.
	if res.Longest.TaskID != "day/train-002" || res.Longest.Tokens != res.Longest.FilterTokens+2 {
		t.Fatalf("longest %+v", res.Longest)
	}
	entries, _ := os.ReadDir(out)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "all.parquet,eval.parquet,train.parquet" {
		t.Fatalf("files %v (no temp files may stay)", names)
	}
	grid, _ := ParseTools([]byte(f.tools["ts-grid"]), "tools")
	wantPrompt, err := tmpl.WithTools(f.tasks["day/train-001"].Prompt, grid, o.Kwargs)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := ReadRows(filepath.Join(out, "train.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	tokenVar := "MY_TOKEN"
	want := Row{
		Prompt:     wantPrompt.Messages,
		EnvClass:   "agentenv",
		Episode:    Episode{Split: "train", Index: 0, TaskID: "day/train-001", Tools: []string{"get_prices", "submit_schedule"}},
		Server:     Server{URL: srv.URL, TokenVar: &tokenVar, Attempts: 3, ResetTimeout: 600, ToolFormat: "hermes"},
		DataSource: "fakegrid",
	}
	if len(rows) != 2 || !reflect.DeepEqual(rows[0], want) {
		t.Fatalf("train row 0:\n%+v\nwant\n%+v", rows[0], want)
	}
	if rows[1].Episode.TaskID != "day/train-002" || rows[1].Episode.Tools[0] != "tune" || !strings.Contains(rows[1].Prompt[0].Content, `"default": 1.0`) || !strings.Contains(rows[1].Prompt[0].Content, `"default": null`) {
		t.Fatalf("train row 1: %+v", rows[1])
	}
	for _, e := range names {
		b, _ := os.ReadFile(filepath.Join(out, e))
		if strings.Contains(string(b), f.token) {
			t.Fatalf("%s holds the token", e)
		}
	}
}

// DuckDB, a reader we did not write, reads the file back with the
// expected types and values: no MAP, zstd, bounded row groups.
func TestRowsReadByDuckDB(t *testing.T) {
	node := oracles.Node(t)
	modules := oracles.NodeModules(t, oracles.DuckDB)
	f, srv := newFakeServer(t)
	cat, _ := NewHTTPCatalog(srv.URL, "")
	out := t.TempDir()
	o := testOptions(srv.URL)
	if _, err := Write(context.Background(), cat, qwen3Template(t), wordCounter{}, out, o); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, filepath.Join("testdata", "read_parquet.js"), filepath.Join(out, "all.parquet"))
	cmd.Env = append(os.Environ(), "NODE_MODULES="+modules)
	b, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("read_parquet.js: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var got struct {
		Columns []struct {
			ColumnName string `json:"column_name"`
			ColumnType string `json:"column_type"`
		}
		Rows      []map[string]any
		Picked    []map[string]any
		RowGroups []map[string]any `json:"row_groups"`
		Logical   []map[string]any
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	wantTypes := [][2]string{
		{"prompt", "STRUCT(\"role\" VARCHAR, \"content\" VARCHAR)[]"},
		{"env_class", "VARCHAR"},
		{"episode", "STRUCT(split VARCHAR, \"index\" BIGINT, task_id VARCHAR, tools VARCHAR[])"},
		{"server", "STRUCT(url VARCHAR, token_var VARCHAR, attempts BIGINT, reset_timeout BIGINT, tool_format VARCHAR)"},
		{"data_source", "VARCHAR"},
	}
	if len(got.Columns) != len(wantTypes) {
		t.Fatalf("columns %+v", got.Columns)
	}
	for i, c := range got.Columns {
		if c.ColumnName != wantTypes[i][0] || c.ColumnType != wantTypes[i][1] {
			t.Errorf("column %d: %s %s, want %s %s", i, c.ColumnName, c.ColumnType, wantTypes[i][0], wantTypes[i][1])
		}
	}
	for _, l := range got.Logical {
		if fmt.Sprint(l["converted_type"]) == "MAP" || strings.Contains(fmt.Sprint(l["logical_type"]), "Map") {
			t.Errorf("a MAP column: %v", l)
		}
	}
	wantPicked := []map[string]any{
		{"first_role": "system", "messages": "2", "task_id": "day/eval-001", "first_tool": "get_prices", "token_var": nil, "attempts": "3"},
		{"first_role": "system", "messages": "2", "task_id": "day/train-001", "first_tool": "get_prices", "token_var": nil, "attempts": "3"},
		{"first_role": "system", "messages": "2", "task_id": "day/train-002", "first_tool": "tune", "token_var": nil, "attempts": "3"},
	}
	if !reflect.DeepEqual(got.Picked, wantPicked) {
		t.Errorf("picked %v\nwant %v", got.Picked, wantPicked)
	}
	rows, err := ReadRows(filepath.Join(out, "all.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got.Rows {
		prompt := r["prompt"].([]any)
		first := prompt[0].(map[string]any)
		ep := r["episode"].(map[string]any)
		if first["content"] != rows[i].Prompt[0].Content || ep["split"] != "all" || ep["index"] != strconv.Itoa(i) || r["env_class"] != "agentenv" || r["data_source"] != "fakegrid" {
			t.Errorf("row %d as DuckDB reads it: %v", i, r)
		}
		if s := r["server"].(map[string]any); s["url"] != srv.URL || s["tool_format"] != "hermes" || s["reset_timeout"] != "600" {
			t.Errorf("row %d server: %v", i, s)
		}
	}
	if len(got.RowGroups) != 1 || got.RowGroups[0]["compression"] != "ZSTD" {
		t.Errorf("row groups %v", got.RowGroups)
	}
	_ = f
}

// Every refusal writes nothing and says what to do.
func TestWriteRefusals(t *testing.T) {
	tmpl := qwen3Template(t)
	outside, err := NewChatTemplate(TokenizerConfig{ChatTemplate: `{% for m in messages %}<{{ m.role }}>{{ m.content }}{% if loop.last and tools %}[tools: {{ tools | tojson }}]{% endif %}</{{ m.role }}>{% endfor %}`})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		setup func(*fakeServer, *Options, *string)
		tmpl  *ChatTemplate
		is    error
		wants []string
		// oddTries, when set, is how often ts-odd's tools may be listed.
		oddTries int
	}{{
		name:  "prompt too long",
		setup: func(_ *fakeServer, o *Options, _ *string) { o.MaxPromptLength = 250 },
		wants: []string{"1 prompt is over --max-prompt-length 250", "nothing was written",
			"task day/train-002: %d tokens as the generator renders it (with the template kwargs), %d as the prompt filter counts it (without them)"},
	}, {
		name:  "tools outside the system turn",
		tmpl:  outside,
		is:    ErrToolsOutsideSystem,
		wants: []string{"task day/", "the chat template renders the tools outside the system turn", "they differ at byte"},
	}, {
		name:  "env fails to deploy",
		setup: func(f *fakeServer, _ *Options, _ *string) { f.deployFails = "ts-odd" },
		is:    ErrDeploy,
		// Once: the server's own DEPLOY_FAILED (a 502) is not retried
		// until the deadline as a proxy's bare 502 would be.
		oddTries: 1,
		wants:    []string{"toolset ts-odd (task day/train-002): listing its tools deploys one of its envs, and that failed", "process exited with status 1", "agentenv play URL --task day/train-002"},
	}, {
		name:  "token refused",
		setup: func(f *fakeServer, _ *Options, token *string) { f.token, *token = "right", "wrong" },
		is:    ErrUnauthorized,
		wants: []string{"list the splits: GET /splits: the server refused the token"},
	}, {
		name:  "negative split size",
		setup: func(f *fakeServer, _ *Options, _ *string) { f.splitList[1].Size = -1 },
		// The client checks what it reads before the writer does.
		wants: []string{`list the splits: GET /splits: the server says split "eval" has -1 tasks, which is not a size`},
	}, {
		name:  "huge split size",
		setup: func(f *fakeServer, _ *Options, _ *string) { f.splitList[1].Size = 1e11 },
		wants: []string{"list split eval: the server says it has 100000000000 tasks"},
	}, {
		name: "longer page than asked",
		setup: func(f *fakeServer, _ *Options, _ *string) {
			f.splits["eval"] = append(f.splits["eval"], f.splits["all"][1:]...)
			f.wholeLists = true
		},
		wants: []string{"list split eval: GET /splits/eval/tasks: the server sent 3 tasks of a split of 3 for [0, 1), which does not add up"},
	}, {
		name:  "task without an id",
		setup: func(f *fakeServer, _ *Options, _ *string) { f.splits["eval"][0].TaskID = "" },
		wants: []string{"list split eval: the task at index 0 has no task_id"},
	}, {
		name:  "split listed twice",
		setup: func(f *fakeServer, _ *Options, _ *string) { f.splitList[2].Name = "eval" },
		wants: []string{"the server lists the split eval twice"},
	}, {
		name:  "unknown split",
		setup: func(_ *fakeServer, o *Options, _ *string) { o.Splits = []string{"train", "test"} },
		wants: []string{`--splits: the server has no split "test"; it has all, eval, train`},
	}, {
		name: "token in the URL",
		setup: func(_ *fakeServer, o *Options, _ *string) {
			o.ServerURL = strings.Replace(o.ServerURL, "http://", "http://u:secret@", 1)
		},
		wants: []string{"must not hold a token"},
	}, {
		name:  "unknown tool format",
		setup: func(_ *fakeServer, o *Options, _ *string) { o.ToolFormat = "json" },
		wants: []string{`--tool-format "json": want one of hermes, qwen3_coder (or another name of one: qwen3coder, qwen3-coder)`},
	}} {
		t.Run(c.name, func(t *testing.T) {
			f, srv := newFakeServer(t)
			o := testOptions(srv.URL)
			token := ""
			if c.setup != nil {
				c.setup(f, &o, &token)
			}
			if c.tmpl == nil {
				c.tmpl = tmpl
			}
			cat, err := NewHTTPCatalog(srv.URL, token)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "data")
			// A deadline, as the CLI sets one: the client waits out only
			// a server that is not ready within it.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err = Write(ctx, cat, c.tmpl, wordCounter{}, out, o)
			if err == nil || (c.is != nil && !errors.Is(err, c.is)) {
				t.Fatalf("got %v, want %v", err, c.is)
			}
			if c.oddTries != 0 && f.toolsCalls["ts-odd"] != c.oddTries {
				t.Errorf("ts-odd's tools were listed %d times, want %d", f.toolsCalls["ts-odd"], c.oddTries)
			}
			var long *TooLongError
			if errors.As(err, &long) {
				// Both counts, as the filter and the generator count.
				l := long.Tasks[0]
				if l.Tokens != l.FilterTokens+2 || l.Tokens <= 250 {
					t.Fatalf("counts %+v", l)
				}
				c.wants[2] = fmt.Sprintf(c.wants[2], l.Tokens, l.FilterTokens)
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nwants %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows the token: %v", err)
			}
			if entries, _ := os.ReadDir(out); len(entries) != 0 {
				t.Fatalf("a refusal left %v", entries)
			}
		})
	}
}

// The tool format's other names, as serve, eval and play take them, are
// the format's: the rows record its canonical name.
func TestWriteResolvesToolFormatNames(t *testing.T) {
	tmpl := qwen3Template(t)
	for _, name := range []string{"qwen3_coder", "qwen3coder", "qwen3-coder"} {
		t.Run(name, func(t *testing.T) {
			_, srv := newFakeServer(t)
			cat, err := NewHTTPCatalog(srv.URL, "")
			if err != nil {
				t.Fatal(err)
			}
			o := testOptions(srv.URL)
			o.ToolFormat = name
			out := filepath.Join(t.TempDir(), "data")
			if _, err := Write(context.Background(), cat, tmpl, wordCounter{}, out, o); err != nil {
				t.Fatal(err)
			}
			rows, err := ReadRows(filepath.Join(out, "all.parquet"))
			if err != nil || len(rows) == 0 || rows[0].Server.ToolFormat != "qwen3_coder" {
				t.Fatalf("rows %+v, %v; want tool_format qwen3_coder", rows, err)
			}
		})
	}
}
