package ui_test

// The /ui page in a real browser: Debian's headless Chromium, driven over
// the Chrome DevTools protocol (chromedp), against a real `agentenv serve
// examples/gridsim` whose GridSim episodes the Go client plays.

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/agentenv/agentenv/client"
	"github.com/agentenv/agentenv/internal/servetest"
	"github.com/agentenv/agentenv/sdk/atomicfile"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

func TestMain(m *testing.M) { os.Exit(servetest.Main(m)) }

// screenshotTo, when set, is where TestBrowser also writes its screenshot
// of the live page (and of an episode's, beside it as NAME-episode.png):
// `go test ./core/ui -run TestBrowser -screenshot $PWD/docs/images/ui.png`
// refreshes those docs/serving.md shows.
var screenshotTo = flag.String("screenshot", "", "also write the live page's screenshot (PNG) here")

const chromiumPath = "/usr/bin/chromium"

// waitGuard bounds one wait on the page.
const waitGuard = 90 * time.Second

// schedule is a hermes reply submitting a GridSim schedule of 24 hours.
func schedule(hours ...int) string {
	s := make([]string, 24)
	for i := range s {
		s[i] = "0"
		if i < len(hours) {
			s[i] = fmt.Sprint(hours[i])
		}
	}
	return `<tool_call>` + "\n" + `{"name": "submit_schedule", "arguments": {"schedule": [` + strings.Join(s, ", ") + `]}}` + "\n" + `</tool_call>`
}

// hostileReply is what a model may write: markup around a real call.
const hostileReply = `<script>document.title="pwned"</script><img src=x onerror="document.title='pwned'">`

func TestBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		sdktest.Missing(t, "Chromium", "drives the /ui page in a real browser", "apt-get install chromium")
	}
	const token = "ui-browser-test-token-5ac1"
	srv := servetest.Start(t, servetest.Options{
		Bundle: filepath.Join(servetest.ModuleRoot(), "examples", "gridsim"), StateDir: t.TempDir(),
		Env:  []string{"AGENTENV_UI_TEST_TOKEN=" + token},
		Args: []string{"--token-var", "AGENTENV_UI_TEST_TOKEN", "--max-concurrent-envs", "2"},
	})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	browser, closeBrowser := startChromium(t, ctx)
	defer closeBrowser()
	// Each wait on the DOM is bounded by waitGuard, a guard only a broken
	// page reaches.
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, waitGuard)
		defer cancel()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v\nserver log:\n%s", what, err, srv.Log)
		}
	}
	text := func(id string) string {
		t.Helper()
		v, err := chromedp.Run(browser, chromedp.Text(chromedp.ID(id)))
		if err != nil {
			t.Fatalf("read #%s: %v", id, err)
		}
		return v
	}
	location := func() string {
		t.Helper()
		v, err := chromedp.Run(browser, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	// No token yet: the form. A wrong token: the form again, with its error.
	run("open the page", chromedp.Navigate(srv.URL+"/ui/"), chromedp.WaitVisible(chromedp.ID("token")))
	run("log in with a wrong token",
		chromedp.SendKeys(chromedp.ID("token"), "not-the-token"), chromedp.Submit(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("login-error")))
	if url := location(); strings.Contains(url, "not-the-token") {
		t.Errorf("the URL %s carries what was typed", url)
	}
	run("log in", chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Submit(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("live")))
	if url := location(); strings.Contains(url, token) || url != srv.URL+"/ui/" {
		t.Errorf("after the login the page is at %s, want %s/ui/ (and never the token in a URL)", url, srv.URL)
	}
	run("the page before any episode", chromedp.WaitVisible(chromedp.ID("no-episodes")))

	// Play GridSim days through the Go client while the page is open.
	c := srv.Client(t, client.Options{Token: token})
	play := func(req client.ResetRequest, replies ...string) string {
		t.Helper()
		sess, err := c.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		res, err := sess.Reset(ctx, req)
		if err != nil {
			t.Fatalf("reset %+v: %v", req, err)
		}
		id := res.Observation.EpisodeID
		for _, r := range replies {
			if res.Done {
				break
			}
			if res, err = sess.Step(ctx, r); err != nil {
				t.Fatalf("episode %s: step: %v", id, err)
			}
		}
		return id
	}
	idle := play(client.ResetRequest{Split: "eval", Index: 0}, schedule(), "done")
	arbitrage := play(client.ResetRequest{Split: "eval", Index: 1}, schedule(1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1), "done")
	hostile := play(client.ResetRequest{Split: "train", Index: 3}, hostileReply+"\n"+schedule(1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1), "done")
	unparsed := play(client.ResetRequest{Split: "train", Index: 4, MaxTurns: 1}, `<tool_call>{"name": "submit_schedule", "arguments": {"schedule": [0, 0,</tool_call>`)
	abandoned := play(client.ResetRequest{Split: "eval", Index: 2}, schedule())
	// A few more days, for the histograms: charge early, sell at the peak.
	for i := 10; i < 16; i++ {
		play(client.ResetRequest{Split: "eval", Index: i}, schedule(1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1), "done")
	}
	// One session stays mid-episode: the page lists it as playing.
	live, err := c.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	res, err := live.Reset(ctx, client.ResetRequest{Split: "eval", Index: 5})
	if err != nil {
		t.Fatal(err)
	}
	playing := res.Observation.EpisodeID
	if _, err := live.Step(ctx, schedule()); err != nil {
		t.Fatal(err)
	}
	// A second holds the other slot, and a third reset waits in the queue.
	second, err := c.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if _, err := second.Reset(ctx, client.ResetRequest{Split: "eval", Index: 6}); err != nil {
		t.Fatal(err)
	}
	third, err := c.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	queuedReset := make(chan error, 1)
	go func() {
		_, err := third.Reset(ctx, client.ResetRequest{Split: "eval", Index: 7, Wait: 3 * time.Minute})
		queuedReset <- err
	}()

	// The live update brings every ended episode into the DOM; the page
	// was loaded before any existed, so only the update can have.
	for _, id := range []string{idle, arbitrage, hostile, unparsed, abandoned} {
		run("episode "+id+" listed", chromedp.WaitVisible(chromedp.CSS(`#episodes a.episode[href="/ui/episodes/`+id+`"]`)))
	}
	run("the episode in play listed, one turn in", chromedp.WaitVisible(chromedp.Search(
		`//table[@id="sessions"]//tr[td/code[text()="`+playing+`"]]/td[7][normalize-space()="1"]`)))
	run("the failure causes charted", chromedp.WaitVisible(chromedp.ID("causes")))
	run("the queued reset shown", chromedp.WaitVisible(chromedp.Search(`//span[@id="queued"][normalize-space()="1"]`)),
		chromedp.WaitVisible(chromedp.Search(`//table[@id="sessions"]//td[starts-with(normalize-space(), "waiting for a slot")]`)))
	updates, err := chromedp.Run(browser, chromedp.AttributeValue(chromedp.ID("live"), "data-updates"))
	if err != nil || updates.Value == "0" || updates.Value == "" {
		t.Errorf("data-updates = %q (%v): the page never swapped in its live part", updates.Value, err)
	}
	episodes, causes, phases, splits := text("episodes"), text("causes"), text("phases"), text("splits-section")
	for _, want := range []string{"day/eval-001", "completed", "unparsed_calls", "abandoned", "client_closed"} {
		if !strings.Contains(episodes, want) {
			t.Errorf("episodes table lacks %q:\n%s", want, episodes)
		}
	}
	for _, want := range []string{"unparsed_calls", "client_closed"} {
		if !strings.Contains(causes, want) {
			t.Errorf("failure causes lack %q:\n%s", want, causes)
		}
	}
	for _, want := range []string{"deploy", "verify", "reply"} {
		if !strings.Contains(phases, want) {
			t.Errorf("phase times lack %q:\n%s", want, phases)
		}
	}
	for _, want := range []string{"eval", "train", "reward: n=", "score/grade: n="} {
		if !strings.Contains(splits, want) {
			t.Errorf("rewards and scores lack %q:\n%s", want, splits)
		}
	}

	// The screenshot, of the page as a user sees it now.
	run("viewport", chromedp.EmulateViewport(1280, 900))
	shot, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	checkPNG(t, shot)
	if err := os.WriteFile(filepath.Join(t.TempDir(), "ui.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if *screenshotTo != "" {
		writeScreenshot(t, *screenshotTo, shot)
	}

	// The second session closes: its slot goes to the queued reset, and the
	// queue empties on the page.
	second.Close()
	if err := <-queuedReset; err != nil {
		t.Fatalf("the queued reset: %v", err)
	}
	run("the queue emptied", chromedp.WaitVisible(chromedp.Search(`//span[@id="queued"][normalize-space()="0"]`)))

	// Click into the episode whose reply carried markup: its conversation,
	// the markup shown as text and never run.
	run("open the episode",
		chromedp.Click(chromedp.CSS(`#episodes a.episode[href="/ui/episodes/`+hostile+`"]`)),
		chromedp.WaitVisible(chromedp.ID("conversation")))
	convo := text("conversation")
	title, err := chromedp.Run(browser, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	scripts, err := chromedp.Run(browser, chromedp.Evaluate[int](`document.querySelectorAll("#conversation *").length + document.querySelectorAll("img").length`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"grid-scale battery", "submit_schedule", hostileReply, "Schedule accepted"} {
		if !strings.Contains(convo, want) {
			t.Errorf("conversation lacks %q:\n%s", want, convo)
		}
	}
	if title == "pwned" || scripts != 0 {
		t.Errorf("the reply's markup ran or became elements: title %q, %d elements in the conversation and images", title, scripts)
	}
	if id := text("episode-id"); id != hostile {
		t.Errorf("episode page shows %q, want %q", id, hostile)
	}
	if *screenshotTo != "" {
		shot, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		checkPNG(t, shot)
		writeScreenshot(t, strings.TrimSuffix(*screenshotTo, ".png")+"-episode.png", shot)
	}

	// Once the login is gone (the cookie cleared, as when it expires), the
	// live page's next update gets 401 and brings back the form.
	run("back to the live page", chromedp.NavigateBack(), chromedp.WaitVisible(chromedp.ID("live")))
	run("clear the cookie", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, network.ClearBrowserCookies, cdp.Empty{})
		return err
	}))
	run("the form once the login is gone", chromedp.WaitVisible(chromedp.ID("token")))
}

// startChromium runs headless Chromium in a process group and a folder of
// its own (its profile and its temporary files); the returned func stops it
// and checks that neither a process of it nor the folder is left.
func startChromium(t *testing.T, ctx context.Context) (context.Context, func()) {
	t.Helper()
	root, err := os.MkdirTemp("", "agentenv-ui-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	profile, tmp := filepath.Join(root, "profile"), filepath.Join(root, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.UserDataDir(profile),
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
		// Chromium's sandbox needs user namespaces or setuid, which
		// containers and root lack; the page is ours, on loopback.
		chromedp.NoSandbox,
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			// Its own group, so the cleanup can tell whether any helper
			// outlived it; killed with the thread that started it, as
			// chromedp's default does.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			// Its singleton socket and shared memory go to its folder.
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
		}),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	browser, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	if err := chromedp.Do(browser); err != nil {
		cancelBrowser()
		cancelAlloc()
		os.RemoveAll(root)
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	proc := chromedp.FromContext(browser).Browser.Process()
	return browser, func() {
		cancelBrowser()
		cancelAlloc() // waits for the browser to exit
		if proc != nil {
			if left := groupMembers(proc.Pid); len(left) > 0 {
				t.Errorf("chromium's processes %v still run after the test; killing them", left)
				syscall.Kill(-proc.Pid, syscall.SIGKILL) //nolint:errcheck
			}
		}
		for _, pid := range procsNaming(root) {
			t.Errorf("chromium process %d still runs after the test; killing it", pid)
			syscall.Kill(pid, syscall.SIGKILL) //nolint:errcheck
		}
		if err := os.RemoveAll(root); err != nil {
			t.Errorf("remove chromium's folder %s: %v", root, err)
		}
	}
}

// groupMembers lists the live processes of process group pgid (a zombie
// nobody reaped yet has exited: not counted).
func groupMembers(pgid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		var state string
		var ppid, pgrp int
		if _, err := fmt.Sscan(string(b[i+1:]), &state, &ppid, &pgrp); err != nil || pgrp != pgid || state == "Z" || state == "X" {
			continue
		}
		var pid int
		fmt.Sscanf(path, "/proc/%d/stat", &pid) //nolint:errcheck
		out = append(out, pid)
	}
	return out
}

// procsNaming lists the running processes whose command line holds s.
func procsNaming(s string) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []int
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil || !bytes.Contains(b, []byte(s)) {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(d, "/proc/%d/cmdline", &pid); err == nil && pid != os.Getpid() && servetest.Alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func checkPNG(t *testing.T, b []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if r := img.Bounds(); r.Dx() < 1000 || r.Dy() < 600 {
		t.Errorf("screenshot is %v, want the whole page", r)
	}
}

// writeScreenshot writes a screenshot whole or not at all.
func writeScreenshot(t *testing.T, path string, png []byte) {
	t.Helper()
	if err := atomicfile.Write(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}
