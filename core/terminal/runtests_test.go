package terminal

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// tgz is a gzip tar of files (name -> content; a name ending in / is a
// folder, "->target" makes a symlink), base64-encoded as run_tests takes it.
func tgz(t *testing.T, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		body := files[name]
		h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}
		switch {
		case strings.HasSuffix(name, "/"):
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		case strings.HasPrefix(body, "->"):
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, body[2:], 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

func TestRunTests(t *testing.T) {
	cases := []struct {
		name   string
		script string            // tests/test.sh; LOGS is the verifier log folder
		extra  map[string]string // more files in the tests folder
		args   map[string]any    // more arguments
		scores map[string]float64
		exit   int
		tail   string // the output tail contains it
		// errPrefix: the call fails with a tool error starting so.
		errPrefix string
		errHas    []string
	}{
		{name: "reward.txt", script: "echo running; echo 1 > LOGS/reward.txt",
			scores: map[string]float64{"reward": 1}, tail: "running\n"},
		{name: "reward.txt with spaces", script: "printf ' 0.25 \\n\\n' > LOGS/reward.txt",
			scores: map[string]float64{"reward": 0.25}},
		{name: "reward.json with two keys", script: `echo '{"tests": 0.5, "lint": 1}' > LOGS/reward.json`,
			scores: map[string]float64{"tests": 0.5, "lint": 1}},
		{name: "reward.txt wins over reward.json", script: `echo 0 > LOGS/reward.txt; echo '{"a": 1}' > LOGS/reward.json`,
			scores: map[string]float64{"reward": 0}},
		{name: "failing script with a reward", script: "echo 0 > LOGS/reward.txt; echo failed >&2; exit 1",
			scores: map[string]float64{"reward": 0}, exit: 1, tail: "failed\n"},
		{name: "env passed", script: `echo "$SCORE" > LOGS/reward.txt`, args: map[string]any{"env": map[string]string{"SCORE": "0.75"}},
			scores: map[string]float64{"reward": 0.75}},
		{name: "runs in the workdir with its tests", script: `[ "$(pwd)" = WORKDIR ] && python_ok=$(cat TESTS/data/expected.txt) && echo $python_ok > LOGS/reward.txt`,
			extra:  map[string]string{"data/": "", "data/expected.txt": "1\n"},
			scores: map[string]float64{"reward": 1}},
		{name: "no reward file", script: "echo checking; exit 2",
			errPrefix: "no_reward: TESTS/test.sh exited 2 without writing LOGS/reward.txt or reward.json; its output ends:\nchecking\n"},
		{name: "garbage reward.txt", script: "echo passed > LOGS/reward.txt",
			errPrefix: `bad_reward: reward.txt holds "passed", not a number`},
		{name: "NaN reward.txt", script: "echo nan > LOGS/reward.txt",
			errPrefix: `bad_reward: reward.txt holds "nan", not a number`},
		{name: "reward.json not an object", script: "echo '[1]' > LOGS/reward.json",
			errPrefix: `bad_reward: reward.json holds "[1]", not a JSON object of numbers`},
		{name: "reward.json with a string", script: `echo '{"a": "1"}' > LOGS/reward.json`,
			errPrefix: `bad_reward: reward.json's "a" is "1", not a number`},
		{name: "reward.json with a null", script: `echo '{"a": 1, "b": null}' > LOGS/reward.json`,
			errPrefix: `bad_reward: reward.json's "b" is null, not a number`},
		{name: "reward.json empty", script: `echo '{}' > LOGS/reward.json`,
			errPrefix: `bad_reward: reward.json is an empty object: it holds no score`},
		{name: "timeout", script: "echo slow; sleep 300", args: map[string]any{"timeout_sec": 1},
			errPrefix: "timeout: the verifier ran past 1s and was killed; its output ends:\nslow\n"},
		{name: "script missing", script: "", args: map[string]any{"script": "TESTS/run.sh"},
			errPrefix: "bad_request: the script TESTS/run.sh is not in the tests"},
		{name: "relative dir", script: "true", args: map[string]any{"dir": "tests"},
			errPrefix: `bad_request: dir "tests" is not an absolute path`},
		{name: "dir holding the workdir", script: "true", args: map[string]any{"dir": "ROOT"},
			errPrefix: "bad_request: dir ROOT holds the working directory"},
		{name: "archive escaping", script: "true", extra: map[string]string{"../evil": "x"},
			errPrefix: `bad_request: files_tgz_b64: entry "../evil" points outside the tests folder`},
		{name: "archive escaping through a symlink", script: "true", extra: map[string]string{"up": "->..", "up/evil": "x"},
			errPrefix: `bad_request: files_tgz_b64: entry "up/evil" points outside the tests folder (through a symlink)`},
		{name: "not base64", script: "true", args: map[string]any{"files_tgz_b64": "%%%"},
			errPrefix: "bad_request: files_tgz_b64 is not base64"},
		{name: "not gzip", script: "true", args: map[string]any{"files_tgz_b64": base64.StdEncoding.EncodeToString([]byte("plain"))},
			errPrefix: "bad_request: files_tgz_b64: not a gzip archive"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, Options{})
			root := filepath.Dir(e.workdir)
			tests := filepath.Join(root, "tests")
			fill := strings.NewReplacer("LOGS", e.logs, "TESTS", tests, "WORKDIR", e.workdir, "ROOT", root)
			files := map[string]string{}
			if c.script != "" {
				files["test.sh"] = fill.Replace(c.script) + "\n"
			}
			for k, v := range c.extra {
				files[k] = v
			}
			args := map[string]any{"files_tgz_b64": tgz(t, files), "dir": tests}
			for k, v := range c.args {
				if s, ok := v.(string); ok {
					v = fill.Replace(s)
				}
				args[k] = v
			}
			text, isErr := e.call(t, ToolRunTests, args)
			if c.errPrefix != "" {
				if want := fill.Replace(c.errPrefix); !isErr || !strings.HasPrefix(text, want) {
					t.Fatalf("got (tool error %v)\n%q\nwant a tool error starting\n%q", isErr, text, want)
				}
				return
			}
			if isErr {
				t.Fatalf("tool error: %s", text)
			}
			r := decodeResult(t, text)
			if len(r.Scores) != len(c.scores) {
				t.Errorf("scores %v, want %v", r.Scores, c.scores)
			}
			for k, v := range c.scores {
				if got, ok := r.Scores[k]; !ok || got != v {
					t.Errorf("scores %v, want %v", r.Scores, c.scores)
				}
			}
			if r.ExitCode != c.exit {
				t.Errorf("exit code %d, want %d", r.ExitCode, c.exit)
			}
			if !strings.Contains(r.OutputTail, c.tail) {
				t.Errorf("output tail %q lacks %q", r.OutputTail, c.tail)
			}
		})
	}
}

// Each run starts clean: the log folder emptied (an earlier reward does
// not count) and the tests folder replaced (an earlier file is gone).
func TestRunTestsStartsClean(t *testing.T) {
	e := newEnv(t, Options{})
	tests := filepath.Join(filepath.Dir(e.workdir), "tests")
	first := map[string]string{"test.sh": "echo 1 > " + e.logs + "/reward.txt\n", "old.txt": "x"}
	if text, isErr := e.call(t, ToolRunTests, map[string]any{"files_tgz_b64": tgz(t, first), "dir": tests}); isErr {
		t.Fatal(text)
	}
	second := map[string]string{"test.sh": "ls " + tests + "\n"}
	text, isErr := e.call(t, ToolRunTests, map[string]any{"files_tgz_b64": tgz(t, second), "dir": tests})
	if !isErr || !strings.HasPrefix(text, "no_reward:") {
		t.Fatalf("the first run's reward counted for the second: %q", text)
	}
	if strings.Contains(text, "old.txt") {
		t.Errorf("the first run's tests were still there: %q", text)
	}
	if _, err := os.Stat(filepath.Join(tests, "old.txt")); !os.IsNotExist(err) {
		t.Errorf("old.txt still in the tests folder: %v", err)
	}
	// A bad archive leaves the tests folder as it was.
	if text, isErr := e.call(t, ToolRunTests, map[string]any{"files_tgz_b64": tgz(t, map[string]string{"../x": ""}), "dir": tests}); !isErr {
		t.Fatalf("a bad archive was accepted: %s", text)
	}
	if _, err := os.Stat(filepath.Join(tests, "test.sh")); err != nil {
		t.Errorf("a bad archive removed the tests: %v", err)
	}
}

// At its timeout the verifier and what it started are killed.
func TestRunTestsTimeoutKillsTheGroup(t *testing.T) {
	e := newEnv(t, Options{})
	tests := filepath.Join(filepath.Dir(e.workdir), "tests")
	pidFile := filepath.Join(e.workdir, "child.pid")
	script := "sleep 300 & echo $! > " + pidFile + "\nsleep 300\n"
	text, isErr := e.call(t, ToolRunTests, map[string]any{"files_tgz_b64": tgz(t, map[string]string{"test.sh": script}), "dir": tests, "timeout_sec": 1})
	if !isErr || !strings.HasPrefix(text, "timeout: the verifier ran past 1s") {
		t.Fatalf("got %q", text)
	}
	waitGone(t, pidFrom(t, pidFile))
}

// A verifier's background processes do not outlive it.
func TestRunTestsKillsLeftovers(t *testing.T) {
	e := newEnv(t, Options{})
	tests := filepath.Join(filepath.Dir(e.workdir), "tests")
	pidFile := filepath.Join(e.workdir, "server.pid")
	script := "nohup sleep 300 >/dev/null 2>&1 & echo $! > " + pidFile + "\necho 1 > " + e.logs + "/reward.txt\n"
	if text, isErr := e.call(t, ToolRunTests, map[string]any{"files_tgz_b64": tgz(t, map[string]string{"test.sh": script}), "dir": tests}); isErr {
		t.Fatal(text)
	}
	waitGone(t, pidFrom(t, pidFile))
}
