package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/dataset/skyrl"
	"github.com/agentenv/agentenv/core/dataset/skyrl/oracles"
	"github.com/agentenv/agentenv/core/tokenizer"
)

// runSkyrl runs agentenv skyrl rows with env added, returning stdout,
// stderr and the exit code.
func runSkyrl(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(agentenv(t), append([]string{"skyrl", "rows"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// The page's command against a real agentenv serve of GridSim, with a
// token: every split written, the rows read back, the token in no file,
// the longest prompt as printed.
func TestSkyrlRowsEndToEnd(t *testing.T) {
	qwen3 := oracles.Qwen3Dir(t)
	addr := freeAddr(t)
	s := startServe(t, gridsimBundle, addr, t.TempDir(), []string{"E2E_TOKEN=" + e2eToken}, "--token-var", "E2E_TOKEN")
	out := filepath.Join(t.TempDir(), "data")
	kwargs := `{"enable_thinking": false}`
	stdout, stderr, code := runSkyrl(t, []string{"E2E_TOKEN=" + e2eToken}, "http://"+addr, out,
		"--tokenizer", qwen3, "--max-prompt-length", "3072", "--chat-template-kwargs", kwargs, "--token-var", "E2E_TOKEN")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s\nserver:\n%s", code, stdout, stderr, s.log)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 || lines[0] != "wrote all.parquet (2200 rows), eval.parquet (200 rows), train.parquet (2000 rows) to "+out {
		t.Fatalf("stdout:\n%s", stdout)
	}
	m := regexp.MustCompile(`^the longest prompt is (\d+) tokens with its tools \(task (\S+); (\d+) as SkyRL's prompt filter counts it, without the template kwargs\)$`).FindStringSubmatch(lines[1])
	if m == nil {
		t.Fatalf("stdout:\n%s", stdout)
	}
	if !strings.Contains(stderr, "read and rendered 2200/2200 tasks") {
		t.Errorf("no progress on stderr:\n%s", stderr)
	}
	// The page quotes this run's output, and its refusal example names the
	// same longest prompt with the same counts.
	docQuotes(t, "training-skyrl.md", strings.Replace(lines[0], out, "data", 1), lines[1],
		fmt.Sprintf("task %s: %s tokens as the generator renders it (with the template kwargs), %s as the prompt filter counts it (without them)", m[2], m[1], m[3]))

	// The rows, and the longest prompt recounted from them.
	// (Qwen3's template uses no pad or unk token, so the config's
	// template, bos and eos are all it needs.)
	counter, err := tokenizer.Load(qwen3)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := tokenizer.LoadConfig(qwen3)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := skyrl.NewChatTemplate(skyrl.TokenizerConfig{ChatTemplate: cfg.ChatTemplate, BOSToken: cfg.BOSToken, EOSToken: cfg.EOSToken})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := skyrl.ParseKwargs(kwargs)
	longest, longestTask := 0, ""
	for split, size := range map[string]int{"all": 2200, "eval": 200, "train": 2000} {
		file := filepath.Join(out, split+".parquet")
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(e2eToken)) {
			t.Fatalf("%s holds the token", file)
		}
		rows, err := skyrl.ReadRows(file)
		if err != nil || len(rows) != size {
			t.Fatalf("%s: %d rows, %v", split, len(rows), err)
		}
		for i, r := range rows {
			if r.Episode.Split != split || r.Episode.Index != int64(i) || r.EnvClass != "agentenv" || r.DataSource != "gridsim" ||
				strings.Join(r.Episode.Tools, ",") != "get_prices,submit_schedule" || r.Server.URL != "http://"+addr ||
				r.Server.TokenVar == nil || *r.Server.TokenVar != "E2E_TOKEN" || r.Server.Attempts != 3 || r.Server.ResetTimeout != 600 || r.Server.ToolFormat != "hermes" {
				t.Fatalf("%s row %d: %+v", split, i, r)
			}
			if len(r.Prompt) != 2 || r.Prompt[0].Role != "system" || !strings.Contains(r.Prompt[0].Content, "\n\n# Tools\n\nYou may call one or more functions") ||
				!strings.Contains(r.Prompt[0].Content, `{"type": "function", "function": {"name": "submit_schedule"`) || r.Prompt[1].Role != "user" {
				t.Fatalf("%s row %d prompt: %+v", split, i, r.Prompt)
			}
			if split != "all" {
				continue
			}
			text, err := tmpl.Render(r.Prompt, skyrl.Tools{}, true, k)
			if err != nil {
				t.Fatal(err)
			}
			n, err := counter.Count(text)
			if err != nil {
				t.Fatal(err)
			}
			if n > longest {
				longest, longestTask = n, r.Episode.TaskID
			}
		}
	}
	if strconv.Itoa(longest) != m[1] || longestTask != m[2] {
		t.Fatalf("printed %s (%s), the rows' longest is %d (%s)", m[1], m[2], longest, longestTask)
	}
	if code := s.signalAndWait(t, syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
}

// The refusals, as the command says them: nothing is written, and the
// message says what to do.
func TestSkyrlRowsRefusals(t *testing.T) {
	qwen3 := oracles.Qwen3Dir(t)
	addr := freeAddr(t)
	s := startServe(t, gridsimBundle, addr, t.TempDir(), []string{"E2E_TOKEN=" + e2eToken}, "--token-var", "E2E_TOKEN")
	broken := freeAddr(t)
	startServe(t, failingDeployBundle(t), broken, t.TempDir(), nil)
	recursive := hostileTokenizer(t, qwen3, "chat_template.jinja", recursiveTemplate)
	fifo := hostileTokenizer(t, qwen3, "tokenizer.json", "fifo")
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"no token", []string{"AGENTENV_TOKEN="}, []string{"http://" + addr},
			[]string{"the server refused the token: the server wants a token; export it in $AGENTENV_TOKEN (or name the variable with --token-var)"}},
		{"wrong token", []string{"E2E_TOKEN=not-it"}, []string{"http://" + addr, "--token-var", "E2E_TOKEN"},
			[]string{"the server refused the token: $E2E_TOKEN does not hold the token the server was started with"}},
		{"empty token variable", nil, []string{"http://" + addr, "--token-var", "E2E_UNSET_TOKEN"},
			[]string{"--token-var E2E_UNSET_TOKEN: the variable is empty"}},
		{"too long", []string{"E2E_TOKEN=" + e2eToken}, []string{"http://" + addr, "--token-var", "E2E_TOKEN", "--max-prompt-length", "500"},
			[]string{"2200 prompts are over --max-prompt-length 500", "nothing was written", "task day/", "tokens as the generator renders it (with the template kwargs)", "as the prompt filter counts it (without them)", "and 2195 more"}},
		{"env fails to deploy", nil, []string{"http://" + broken},
			[]string{"toolset ", "listing its tools deploys one of its envs, and that failed", "agentenv play URL --task day/"}},
		{"no server", nil, []string{"http://" + freeAddr(t)},
			[]string{"connection refused\nno server is listening at 127.0.0.1:", "start one with `agentenv serve BUNDLE --addr 127.0.0.1:"}},
		{"bad kwargs", nil, []string{"http://" + addr, "--chat-template-kwargs", "{enable_thinking: false}"},
			[]string{"--chat-template-kwargs: chat template kwargs: not valid JSON"}},
		// A tokenizer folder is anyone's: a template that recurses without
		// end fails naming its file (it was a fatal stack overflow after
		// 1-3 GB), a FIFO is refused (it was a hang).
		{"self-recursive template", []string{"E2E_TOKEN=" + e2eToken}, []string{"http://" + addr, "--token-var", "E2E_TOKEN", "--tokenizer", recursive},
			[]string{filepath.Join(recursive, "chat_template.jinja") + ": the chat template broke a bound of its sandbox: it recursed past 64 MiB of stack"}},
		{"tokenizer.json a FIFO", nil, []string{"http://" + addr, "--tokenizer", fifo},
			[]string{filepath.Join(fifo, "tokenizer.json") + ": not a regular file but a named pipe (FIFO)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "data")
			args := append([]string{c.args[0], out, "--tokenizer", qwen3, "--max-prompt-length", "3072"}, c.args[1:]...)
			stdout, stderr, code := runSkyrl(t, c.env, args...)
			if code != 1 || stdout != "" {
				t.Fatalf("exit %d, stdout %q", code, stdout)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(stderr, e2eToken) {
				t.Error("stderr shows the token")
			}
			if entries, _ := os.ReadDir(out); len(entries) != 0 {
				t.Errorf("left %v", entries)
			}
		})
	}
	if code := s.signalAndWait(t, syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
}

// recursiveTemplate is a chat template whose macro calls itself without end.
const recursiveTemplate = `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`

// hostileTokenizer is a tokenizer folder of src's files (linked) but file,
// which holds content, or is a FIFO ("fifo") or a link to /dev/zero
// ("/dev/zero").
func hostileTokenizer(t *testing.T, src, file, content string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		if err := os.Symlink(filepath.Join(src, f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, file)
	os.Remove(path)
	var err error
	switch content {
	case "fifo":
		err = syscall.Mkfifo(path, 0o644)
	case "/dev/zero":
		err = os.Symlink("/dev/zero", path)
	default:
		err = os.WriteFile(path, []byte(content), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// failingDeployBundle copies GridSim with an env whose process exits at
// once, so deploying it fails.
func failingDeployBundle(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs(gridsimBundle)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "brokengrid")
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	toml := "command = [\"sh\", \"-c\", \"echo the env cannot start >&2; exit 3\"]\nport = 18765\n"
	if err := os.WriteFile(filepath.Join(dir, "envs", "gridsim", "env.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
