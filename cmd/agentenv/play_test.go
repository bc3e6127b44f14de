package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/agentenv/agentenv/cmd/agentenv/cli"
	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/core/server"
)

// echoPlayer plays task "t" (also index 0 of split "all"): a reply "done"
// ends the episode with reward 0.5, anything else is echoed by a tool,
// except "bad" (refused: VALIDATION_ERROR), "crash" (EXECUTION_ERROR),
// "unscored" (UNSCORED) and "slow" (answered only when the step's context
// ends). Task "deploy-fail" fails to start (DEPLOY_FAILED); task
// "slow-close" takes a second to tear down. It counts the teardowns.
type echoPlayer struct {
	closed atomic.Int32
	slow   atomic.Int32 // "slow" steps begun: tests wait on it, not on a sleep
}

func (p *echoPlayer) Play(req episode.Request) (episode.Episode, error) {
	switch {
	case req.TaskID == "t", req.TaskID == "" && req.Split == "all" && *req.Index == 0:
		return &echoEpisode{p: p}, nil
	case req.TaskID == "deploy-fail", req.TaskID == "slow-close":
		return &echoEpisode{p: p, task: req.TaskID}, nil
	}
	return nil, &episode.Error{Code: episode.CodeNotFound, Err: errors.New("no such task")}
}

var echoTool = episode.Tool{Name: "echo", Description: "Echo text.", Parameters: []byte(`{"type":"object"}`)}

func (p *echoPlayer) Tools(_ context.Context, toolset string) ([]episode.Tool, error) {
	if toolset != "ts-echo" {
		return nil, &episode.Error{Code: episode.CodeNotFound, Err: errors.New("no such toolset")}
	}
	return []episode.Tool{echoTool}, nil
}

type echoEpisode struct {
	p    *echoPlayer
	task string
	turn int
	done bool
}

func (e *echoEpisode) Abandon(episode.Cause) {}

func (e *echoEpisode) Result() episode.Result { return episode.Result{EpisodeID: "ep-1"} }

func (e *echoEpisode) ID() string { return "ep-1" }

func (e *echoEpisode) State() episode.State {
	return episode.State{EpisodeID: "ep-1", TaskID: "t", Turn: e.turn, Done: e.done, Started: true}
}

func (e *echoEpisode) Start(context.Context) (episode.Observation, error) {
	if e.task == "deploy-fail" {
		return episode.Observation{}, &episode.Error{Code: episode.CodeDeploy, Err: errors.New("env exited at once")}
	}
	return episode.Observation{EpisodeID: "ep-1", TaskID: "t",
		Messages: []episode.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Say done."}},
		Tools:    []episode.Tool{echoTool},
	}, nil
}

func (e *echoEpisode) Step(ctx context.Context, reply string) (episode.Observation, error) {
	fail := func(code episode.Code, msg string) (episode.Observation, error) {
		return episode.Observation{}, &episode.Error{Code: code, Err: errors.New(msg)}
	}
	switch reply {
	case "bad":
		return fail(episode.CodeValidation, "bad reply")
	case "crash":
		return fail(episode.CodeExecution, "env crashed")
	case "unscored":
		return fail(episode.CodeUnscored, "no verifier scored the episode")
	case "slow":
		e.p.slow.Add(1)
		<-ctx.Done()
		return episode.Observation{}, ctx.Err()
	}
	e.turn++
	obs := episode.Observation{EpisodeID: "ep-1", TaskID: "t", Turn: e.turn}
	if reply == "done" {
		r := 0.5
		obs.Done, obs.Reward, obs.Metrics = true, &r, map[string]float64{"score/grade": 0.5}
		e.done = true
		return obs, nil
	}
	obs.Messages = []episode.Message{{Role: "tool", Content: "echo: " + reply}}
	return obs, nil
}

func (e *echoEpisode) Close(context.Context) error {
	if e.task == "slow-close" {
		time.Sleep(time.Second) // the slow teardown the task is named for
	}
	e.p.closed.Add(1)
	return nil
}

type oneTask struct{}

func (oneTask) Splits() []server.Split { return []server.Split{{Name: "all", Size: 1}} }
func (oneTask) Tasks(split string, _, _ int) ([]server.TaskEntry, int, error) {
	if split != "all" {
		return nil, 0, &episode.Error{Code: episode.CodeNotFound, Err: errors.New("no such split")}
	}
	return []server.TaskEntry{{TaskID: "t", Toolset: "ts-echo"}}, 1, nil
}
func (oneTask) Task(id string) (server.TaskInfo, error) {
	if id != "t" {
		return server.TaskInfo{}, &episode.Error{Code: episode.CodeNotFound, Err: errors.New("no such task")}
	}
	return server.TaskInfo{TaskID: "t", Toolset: "ts-echo", Turns: 1}, nil
}

// echoServer is an in-process server over echoPlayer.
type echoServer struct {
	*server.Server
	player *echoPlayer
	addr   string
	base   string // http://addr
}

// startEchoServer serves echoPlayer on addr ("": a free port) with opts
// (Player, Catalog and Info are set here) until the test ends.
func startEchoServer(t *testing.T, addr string, opts server.Options) *echoServer {
	t.Helper()
	p := &echoPlayer{}
	opts.Player, opts.Catalog, opts.Info = p, oneTask{}, server.Info{Name: "echo"}
	s, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return &echoServer{Server: s, player: p, addr: ln.Addr().String(), base: "http://" + ln.Addr().String()}
}

// runPlayCmd runs `agentenv play base ARGS` in process, with token in the
// environment variable --token-var names (AGENTENV_TOKEN by default): the
// command's environment, not the process's, so tests run in parallel.
func runPlayCmd(t *testing.T, base, token string, in io.Reader, out io.Writer, args ...string) error {
	tokenVar := "AGENTENV_TOKEN"
	for i, a := range args {
		if a == "--token-var" && i+1 < len(args) {
			tokenVar = args[i+1]
		}
	}
	env := map[string]string{tokenVar: token}
	cmd := cli.NewRootCmdEnv(version, cli.Env{Getenv: func(k string) string { return env[k] }})
	cmd.SetArgs(append([]string{"play", base}, args...))
	cmd.SetIn(in)
	cmd.SetOut(out)
	cmd.SetErr(out)
	return cmd.Execute()
}

func TestPlay(t *testing.T) {
	t.Parallel()
	base := startEchoServer(t, "", server.Options{Token: "tok"}).base
	cases := []struct {
		name, input, token string
		opts               []string
		want               []string
		err                string
	}{
		{name: "full episode", token: "tok", opts: []string{"--task", "t"},
			input: "hello\nworld\n.\nbad\n.\ndone\n.\n",
			want: []string{"episode ep-1, task t", "[system]\nBe brief.", "[user]\nSay done.", "- echo: Echo text.",
				"[tool]\necho: hello\nworld", "error: bad reply", "done after 2 turns: reward 0.5", "score/grade = 0.5"}},
		{name: "last reply without dot", token: "tok", opts: []string{"--split", "all", "--index", "0"}, input: "done",
			want: []string{"reward 0.5"}},
		{name: "quit", token: "tok", opts: []string{"--task", "t"}, input: "/quit\n", err: "stopped before"},
		{name: "input ends early", token: "tok", opts: []string{"--task", "t"}, input: "hi\n", err: "input ended"},
		{name: "unknown task", token: "tok", opts: []string{"--task", "zz"}, err: "NOT_FOUND: no such task"},
		{name: "episode fails", token: "tok", opts: []string{"--task", "t"}, input: "crash\n.\n", err: "EXECUTION_ERROR: env crashed"},
		{name: "no token", opts: []string{"--task", "t", "--token-var", "MY_TOKEN"}, err: "wants a token: put it in $MY_TOKEN"},
		// Issue 11 item 13: a token that is there but wrong is not "missing".
		{name: "refused token", token: "wrong-token", opts: []string{"--task", "t", "--token-var", "MY_TOKEN"}, err: "refused the token in $MY_TOKEN"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := runPlayCmd(t, base, tc.token, strings.NewReader(tc.input), &out, tc.opts...)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want error with %q\n%s", err, tc.err, out.String())
				}
				if tc.token != "" && tc.token != "tok" && strings.Contains(err.Error()+out.String(), tc.token) {
					t.Fatalf("the token shows: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// A token given as URL userinfo (as OpenEnv's Python client takes it)
// authenticates the session and never shows in an error.
func TestPlayTokenInURL(t *testing.T) {
	t.Parallel()
	base := startEchoServer(t, "", server.Options{Token: "tok-in-url"}).base
	withUser := func(pass string) string { return strings.Replace(base, "http://", "http://openenv:"+pass+"@", 1) }
	var out bytes.Buffer
	if err := runPlayCmd(t, withUser("tok-in-url"), "", strings.NewReader("done\n"), &out, "--task", "t"); err != nil {
		t.Fatalf("token in URL: %v\n%s", err, out.String())
	}
	err := runPlayCmd(t, withUser("wrong-secret"), "", strings.NewReader("done\n"), &out, "--task", "t", "--token-var", "T")
	if err == nil || !strings.Contains(err.Error(), "refused the token in the URL") || strings.Contains(err.Error(), "wrong-secret") || strings.Contains(out.String(), "wrong-secret") {
		t.Fatalf("wrong token in URL: got %v, want an error that does not echo it", err)
	}
}

// Issue 11 item 13: a server shutdown while play waits for the next reply
// is reported at once, as a shutdown, not after the input ends as
// "stopped before the episode was done".
func TestPlayReportsShutdownMidEpisode(t *testing.T) {
	t.Parallel()
	srv := startEchoServer(t, "", server.Options{})
	in, inW := io.Pipe() // input that never comes, like a user thinking
	t.Cleanup(func() { inW.Close() })
	out := &lockedBuffer{}
	done := make(chan error, 1)
	go func() { done <- runPlayCmd(t, srv.base, "", in, out, "--task", "t") }()
	wait.For(t, "a prompt for a reply", func() error {
		if text := out.String(); !strings.Contains(text, "--- reply") {
			return fmt.Errorf("none in:\n%s", text)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "server shut down mid-episode (episode ep-1)") {
			t.Fatalf("got %v, want the shutdown reported", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("play still waits on its input 10 s after the server shut down:\n%s", out)
	}
}

// Issue 11 item 13: "connection refused" says no server runs there and
// how to start one.
func TestPlayNoServer(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	var out bytes.Buffer
	start := time.Now()
	err := runPlayCmd(t, "http://"+addr, "", strings.NewReader("done\n"), &out, "--task", "t")
	if err == nil || !strings.Contains(err.Error(), "no server is listening at "+addr) || !strings.Contains(err.Error(), "agentenv serve BUNDLE --addr "+addr) {
		t.Errorf("nothing listening: got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s to report that nothing listens", d)
	}
}
