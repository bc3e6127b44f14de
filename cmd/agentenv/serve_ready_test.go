package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/client"
	"github.com/agentenv/agentenv/sdk/sdktest/wait"
)

// gridsimWithEnv copies GridSim into a temp dir named name with the
// env.toml toml(src, envDir) gives: src is GridSim's own folder, envDir
// the copy's env folder.
func gridsimWithEnv(t *testing.T, name string, toml func(src, envDir string) string) string {
	t.Helper()
	src, err := filepath.Abs(gridsimBundle)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	envDir := filepath.Join(dir, "envs", "gridsim")
	if err := os.WriteFile(filepath.Join(envDir, "env.toml"), []byte(toml(src, envDir)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// slowBuildBundle copies GridSim into a temp dir with an env whose build
// waits until the test writes to the FIFO it returns, then compiles the
// env as GridSim's own build does.
func slowBuildBundle(t *testing.T) (dir, release string) {
	t.Helper()
	release = filepath.Join(t.TempDir(), "release")
	if err := syscall.Mkfifo(release, 0o600); err != nil {
		t.Fatal(err)
	}
	dir = gridsimWithEnv(t, "slowbuild", func(src, envDir string) string {
		return fmt.Sprintf(`build = ["sh", "-c", "cat %s >/dev/null && CGO_ENABLED=0 go build -C %s -o %s ."]
command = ["bin/gridsim-env"]
port = 18765
`, release, filepath.Join(src, "envs", "gridsim"), filepath.Join(envDir, "bin", "gridsim-env"))
	})
	return dir, release
}

// While its env builds, serve listens: /health says what builds, the
// catalogue and the WebSocket answer 503 PREPARING naming the env, the
// log says the build runs; a client that waits out a 503 gets served as
// soon as the build ends.
func TestServeAnswersWhileItsEnvBuilds(t *testing.T) {
	bundleDir, release := slowBuildBundle(t)
	addr := freeAddr(t)
	s := launchServe(t, bundleDir, addr, t.TempDir(), nil)

	var once sync.Once
	var play *playRun
	released := make(chan error, 1)
	var seen []error
	c, err := client.New("http://"+addr, client.Options{OnRetry: func(err error, _ time.Duration) {
		seen = append(seen, err)
		if !errors.Is(err, client.CodePreparing) || !strings.Contains(err.Error(), "env gridsim is building") {
			return // not listening yet, or the env still waits its turn to build
		}
		once.Do(func() {
			checkPreparing(t, addr)
			play = startPlayWaiting(t, addr)
			// The build is waiting on the FIFO: let it go on.
			go func() {
				f, err := os.OpenFile(release, os.O_WRONLY, 0)
				if err == nil {
					err = f.Close()
				}
				released <- err
			}()
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.Health(ctx); err != nil {
		t.Fatalf("health: %v (saw %v)\n%s", err, seen, s.log)
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	var preparing error
	for _, e := range seen {
		if errors.Is(e, client.CodePreparing) {
			preparing = e
		}
	}
	if preparing == nil || !strings.Contains(preparing.Error(), "env gridsim is building") {
		t.Fatalf("the client was never told the env builds: %v", seen)
	}
	sess, err := c.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if _, err := sess.Reset(ctx, client.ResetRequest{TaskID: "day/eval-001"}); err != nil {
		t.Fatalf("reset once ready: %v\n%s", err, s.log)
	}
	// play, started while the env built, said so and played once it could.
	if play == nil {
		t.Fatal("play never started")
	}
	if err := <-play.exited; err == nil {
		t.Errorf("play with /quit before the end exited 0")
	}
	if out := play.out.String(); !strings.Contains(out, "episode ") || !strings.Contains(out, "task day/eval-001") {
		t.Errorf("play did not play once the server was ready:\n%s", out)
	}
	log := s.log.String()
	for _, want := range []string{"listening; preparing the envs", "preparing env (building what it needs, once): env=gridsim", "env prepared: env=gridsim", "serving: bundle=slowbuild"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	if code := s.signalAndWait(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
}

// checkPreparing checks what a preparing server answers: /health names
// the env building; /splits and the WebSocket upgrade are 503 PREPARING.
func checkPreparing(t *testing.T, addr string) {
	t.Helper()
	get := func(path string, h http.Header) (int, []byte) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	status, body := get("/health", nil)
	var h struct {
		Status string
		Envs   []struct{ Env, State string }
	}
	if json.Unmarshal(body, &h) != nil || status != 503 || h.Status != "preparing" || len(h.Envs) != 1 || h.Envs[0].Env != "gridsim" || h.Envs[0].State != "building" {
		t.Errorf("/health while building: %d %s", status, body)
	}
	ws := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}
	for path, h := range map[string]http.Header{"/splits": nil, "/ws": ws} {
		status, body := get(path, h)
		var e struct{ Detail, Code string }
		if json.Unmarshal(body, &e) != nil || status != 503 || e.Code != "PREPARING" || !strings.Contains(e.Detail, "still preparing: env gridsim is building") {
			t.Errorf("%s while building: %d %s", path, status, body)
		}
	}
}

type playRun struct {
	exited chan error // play's exit
	out    *lockedBuffer
}

// startPlayWaiting starts agentenv play on a server still preparing and
// returns once play said it waits for the server; it quits after the
// opening observation.
func startPlayWaiting(t *testing.T, addr string) *playRun {
	t.Helper()
	cmd := exec.Command(agentenv(t), "play", "http://"+addr, "--task", "day/eval-001", "--wait", "3m")
	cmd.Stdin = strings.NewReader("/quit\n")
	pr, pw := io.Pipe()
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = io.MultiWriter(pw, out), out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	told := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "waiting for the server: still preparing: env gridsim is building") {
				told <- true
				break
			}
		}
		io.Copy(io.Discard, pr)
		close(told)
	}()
	exited := make(chan error, 1)
	go func() {
		exited <- cmd.Wait()
		pw.Close()
	}()
	if !<-told {
		t.Fatalf("play did not say it waits for the server:\n%s", out.String())
	}
	return &playRun{exited: exited, out: out}
}

// --deploy-timeout bounds one env's deploy: an env that never listens
// fails its reset DEPLOY_FAILED naming the timeout given, and its process
// is gone; a timeout of 0 is refused at start, naming the flag.
func TestServeDeployTimeout(t *testing.T) {
	dir := gridsimWithEnv(t, "mute", func(string, string) string { return "command = [\"sleep\", \"600\"]\nport = 18765\n" })
	out, stderr, code := runServeEnv(t, "serve", dir, "--addr", freeAddr(t), "--deploy-timeout", "0s")
	if code == 0 || !strings.Contains(stderr, "--deploy-timeout must be more than 0, got 0s") {
		t.Fatalf("--deploy-timeout 0s: exit %d:\n%s%s", code, out, stderr)
	}

	addr := freeAddr(t)
	s := startServe(t, dir, addr, t.TempDir(), nil, "--deploy-timeout", "1500ms")
	cl := dialServe(t, addr, "")
	typ, data, err := cl.call(`{"type": "reset", "data": {"split": "eval", "index": 0}}`)
	msg, _ := data["message"].(string)
	if err != nil || typ != "error" || data["code"] != "DEPLOY_FAILED" ||
		!strings.Contains(msg, `env "gridsim" was not ready within the deploy timeout (1.5s)`) {
		t.Fatalf("reset of an env that never listens: %s %v %v", typ, data, err)
	}
	// The failed deploy's env is stopped off the client's path (the
	// plugin's own cleanup, or the engine's reap by the deploy's label):
	// gone soon after the error, not necessarily before it.
	wait.For(t, "the failed deploy's env to be gone", func() error {
		if left := stateFiles(t, s.stateDir); len(left) != 0 {
			return fmt.Errorf("%d env processes left after the failed deploy: %+v", len(left), left)
		}
		return nil
	})
	if code := s.signalAndWait(t, syscall.SIGTERM, time.Minute); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.log)
	}
}
