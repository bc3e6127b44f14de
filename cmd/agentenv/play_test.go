package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/core/server"
)

// echoPlayer: one task "t"; a reply "bad" is a validation error, "done"
// ends the episode with reward 0.5, anything else is echoed by a tool.
type echoPlayer struct{}

func (echoPlayer) Play(req episode.Request) (episode.Episode, error) {
	if req.TaskID != "t" && req.Split != "all" {
		return nil, &episode.Error{Code: episode.CodeNotFound, Err: errors.New("no such task")}
	}
	return &echoEpisode{}, nil
}

func (echoPlayer) Tools(context.Context, string) ([]episode.Tool, error) { return nil, nil }

type echoEpisode struct{ turn int }

func (e *echoEpisode) ID() string { return "ep-1" }

func (e *echoEpisode) State() episode.State {
	return episode.State{EpisodeID: "ep-1", TaskID: "t", Turn: e.turn, Started: true}
}

func (e *echoEpisode) Start(context.Context) (episode.Observation, error) {
	return episode.Observation{EpisodeID: "ep-1", TaskID: "t",
		Messages: []episode.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Say done."}},
		Tools:    []episode.Tool{{Type: "function", Function: episode.Function{Name: "echo", Description: "Echo text.", Parameters: []byte(`{"type":"object"}`)}}},
	}, nil
}

func (e *echoEpisode) Step(_ context.Context, reply string) (episode.Observation, error) {
	if reply == "bad" {
		return episode.Observation{}, &episode.Error{Code: episode.CodeValidation, Err: errors.New("bad reply")}
	}
	e.turn++
	obs := episode.Observation{EpisodeID: "ep-1", TaskID: "t", Turn: e.turn}
	if reply == "done" {
		r := 0.5
		obs.Done, obs.Reward, obs.Metrics = true, &r, map[string]float64{"score/grade": 0.5}
		return obs, nil
	}
	obs.Messages = []episode.Message{{Role: "tool", Content: "echo: " + reply}}
	return obs, nil
}

func (e *echoEpisode) Close(context.Context) error { return nil }

type oneTask struct{}

func (oneTask) Splits() []server.Split { return []server.Split{{Name: "all", Size: 1}} }
func (oneTask) Tasks(string, int, int) ([]server.TaskEntry, int, error) {
	return []server.TaskEntry{{TaskID: "t"}}, 1, nil
}
func (oneTask) Task(string) (server.TaskInfo, error) { return server.TaskInfo{TaskID: "t"}, nil }

func startEchoServer(t *testing.T, token string) string {
	t.Helper()
	s, err := server.New(server.Options{Player: echoPlayer{}, Catalog: oneTask{}, Token: token, Info: server.Info{Name: "echo"}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String()
}

func TestPlay(t *testing.T) {
	base := startEchoServer(t, "tok")
	cases := []struct {
		name, input, token string
		opts               playOptions
		want               []string
		err                string
	}{
		{name: "full episode", token: "tok", opts: playOptions{task: "t"},
			input: "hello\nworld\n.\nbad\n.\ndone\n.\n",
			want: []string{"episode ep-1, task t", "[system]\nBe brief.", "[user]\nSay done.", "- echo: Echo text.",
				"[tool]\necho: hello\nworld", "error: bad reply", "done after 2 turns: reward 0.5", "score/grade = 0.5"}},
		{name: "last reply without dot", token: "tok", opts: playOptions{split: "all", index: 0}, input: "done",
			want: []string{"reward 0.5"}},
		{name: "quit", token: "tok", opts: playOptions{task: "t"}, input: "/quit\n", err: "stopped before"},
		{name: "input ends early", token: "tok", opts: playOptions{task: "t"}, input: "hi\n", err: "input ended"},
		{name: "unknown task", token: "tok", opts: playOptions{task: "zz"}, err: "NOT_FOUND: no such task"},
		{name: "no token", opts: playOptions{task: "t", tokenVar: "MY_TOKEN"}, err: "$MY_TOKEN"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := runPlay(context.Background(), base, tc.opts, tc.token, strings.NewReader(tc.input), &out)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want error with %q\n%s", err, tc.err, out.String())
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

func TestWSURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8200":       "ws://127.0.0.1:8200/ws",
		"http://127.0.0.1:8200/":      "ws://127.0.0.1:8200/ws",
		"https://h.example/prefix":    "wss://h.example/prefix/ws",
		"ws://127.0.0.1:8200/ws":      "ws://127.0.0.1:8200/ws",
		"127.0.0.1:8200":              "ws://127.0.0.1:8200/ws",
		"http://u:p@127.0.0.1:1/x/ws": "ws://u:p@127.0.0.1:1/x/ws",
	} {
		if got, err := wsURL(in); err != nil || got != want {
			t.Errorf("%s: got %s %v, want %s", in, got, err, want)
		}
	}
	if _, err := wsURL("ftp://h"); err == nil {
		t.Error("ftp accepted")
	}
	// A bad URL's error never shows the password (it may be the token).
	for _, bad := range []string{"ftp://u:s3cret@h", "http://u:s3cret@h:99999999x", "http://u:s3cret@h/%zz"} {
		_, err := wsURL(bad)
		if err == nil {
			t.Errorf("%s accepted", bad)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error for a bad URL shows the password: %v", err)
		}
	}
}

// A token given as URL userinfo (as OpenEnv's Python client takes it)
// authenticates the session and never shows in an error.
func TestPlayTokenInURL(t *testing.T) {
	base := startEchoServer(t, "tok-in-url")
	withUser := func(pass string) string { return strings.Replace(base, "http://", "http://openenv:"+pass+"@", 1) }
	var out bytes.Buffer
	if err := runPlay(context.Background(), withUser("tok-in-url"), playOptions{task: "t"}, "", strings.NewReader("done\n"), &out); err != nil {
		t.Fatalf("token in URL: %v\n%s", err, out.String())
	}
	err := runPlay(context.Background(), withUser("wrong-secret"), playOptions{task: "t", tokenVar: "T"}, "", strings.NewReader("done\n"), &out)
	if err == nil || strings.Contains(err.Error(), "wrong-secret") || strings.Contains(out.String(), "wrong-secret") {
		t.Fatalf("wrong token in URL: got %v, want an error that does not echo it", err)
	}
}
