package terminal

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Verifier defaults.
const (
	DefaultTestsDir       = "/tests"
	DefaultTestsTimeout   = 600
	verifierOutputTailMax = 8 << 10
)

// Causes a failed run_tests's error text starts with.
const (
	CauseTimeout    = "timeout"     // the script ran past its timeout (model or task)
	CauseNoReward   = "no_reward"   // it exited without writing a reward file
	CauseBadReward  = "bad_reward"  // the reward file holds no number(s)
	CauseBadRequest = "bad_request" // the call's arguments or archive are unusable
	CauseCancelled  = "cancelled"   // the caller cancelled the call
	CauseInternal   = "internal"    // the server could not do its part
)

type runTestsIn struct {
	FilesTgzB64 string            `json:"files_tgz_b64"`
	Dir         string            `json:"dir,omitempty"`
	Script      string            `json:"script,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	TimeoutSec  int               `json:"timeout_sec,omitempty"`
}

// TestsResult is run_tests's result, as JSON text.
type TestsResult struct {
	Scores     map[string]float64 `json:"scores"`
	ExitCode   int                `json:"exit_code"`
	OutputTail string             `json:"output_tail"`
}

func causef(cause, format string, args ...any) error {
	return fmt.Errorf("%s: %s", cause, fmt.Sprintf(format, args...))
}

func (s *Server) runTests(ctx context.Context, in runTestsIn) (string, error) {
	dir := in.Dir
	if dir == "" {
		dir = DefaultTestsDir
	}
	if !filepath.IsAbs(dir) {
		return "", causef(CauseBadRequest, "dir %q is not an absolute path", dir)
	}
	dir = filepath.Clean(dir)
	for _, keep := range []struct{ what, path string }{{"the working directory", s.opts.Workdir}, {"the verifier log folder", s.opts.VerifierLogs}} {
		if within(keep.path, dir) {
			return "", causef(CauseBadRequest, "dir %s holds %s (%s); replacing it would delete it", dir, keep.what, keep.path)
		}
	}
	script := in.Script
	if script == "" {
		script = filepath.Join(dir, "test.sh")
	}
	timeout := in.TimeoutSec
	if timeout == 0 {
		timeout = DefaultTestsTimeout
	}
	if timeout < 0 {
		return "", causef(CauseBadRequest, "timeout_sec %d is negative", in.TimeoutSec)
	}
	archive, err := base64.StdEncoding.DecodeString(in.FilesTgzB64)
	if err != nil {
		return "", causef(CauseBadRequest, "files_tgz_b64 is not base64: %v", err)
	}

	s.verifyMu.Lock()
	defer s.verifyMu.Unlock()
	if err := emptyFolder(s.opts.VerifierLogs); err != nil {
		return "", causef(CauseInternal, "emptying %s: %v", s.opts.VerifierLogs, err)
	}
	if err := replaceWithArchive(dir, archive); err != nil {
		return "", err
	}
	if fi, err := os.Stat(script); err != nil || !fi.Mode().IsRegular() {
		return "", causef(CauseBadRequest, "the script %s is not in the tests (the archive unpacked into %s)", script, dir)
	}
	sh, err := findShell()
	if err != nil {
		return "", causef(CauseInternal, "%v", err)
	}
	output := newTailBuffer(verifierOutputTailMax)
	start := time.Now()
	out, err := s.run(ctx, job{
		args: []string{sh, script}, dir: s.opts.Workdir, env: commandEnv(in.Env),
		timeout: time.Duration(timeout) * time.Second, stdout: output, stderr: output,
	})
	if err != nil {
		return "", causef(CauseInternal, "starting %s %s: %v", sh, script, err)
	}
	output.freeze()
	tail, _ := output.text()
	s.opts.Logger.Info("run_tests", "exit_code", out.exitCode, "timed_out", out.timedOut,
		"cancelled", out.cancelled, "duration", time.Since(start).Round(time.Millisecond))
	switch {
	case out.cancelled:
		return "", causef(CauseCancelled, "the call was cancelled; the verifier was killed")
	case out.timedOut:
		return "", causef(CauseTimeout, "the verifier ran past %ds and was killed; its output ends:\n%s", timeout, tail)
	}
	scores, err := s.readReward(script, out.exitCode, tail)
	if err != nil {
		return "", err
	}
	res, err := json.Marshal(TestsResult{Scores: scores, ExitCode: out.exitCode, OutputTail: tail})
	if err != nil {
		return "", causef(CauseInternal, "encoding the result: %v", err)
	}
	return string(res), nil
}

// readReward reads reward.txt (the score "reward"), else reward.json (a
// score per key).
func (s *Server) readReward(script string, exitCode int, tail string) (map[string]float64, error) {
	txt := filepath.Join(s.opts.VerifierLogs, "reward.txt")
	if data, err := os.ReadFile(txt); err == nil {
		v := strings.TrimSpace(string(data))
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, causef(CauseBadReward, "reward.txt holds %s, not a number", quoteShort(v))
		}
		return map[string]float64{"reward": f}, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, causef(CauseInternal, "reading reward.txt: %v", err)
	}
	js := filepath.Join(s.opts.VerifierLogs, "reward.json")
	data, err := os.ReadFile(js)
	if errors.Is(err, os.ErrNotExist) {
		return nil, causef(CauseNoReward, "%s exited %d without writing %s or reward.json; its output ends:\n%s",
			script, exitCode, txt, tail)
	} else if err != nil {
		return nil, causef(CauseInternal, "reading reward.json: %v", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		return nil, causef(CauseBadReward, "reward.json holds %s, not a JSON object of numbers", quoteShort(strings.TrimSpace(string(data))))
	}
	if len(raw) == 0 {
		return nil, causef(CauseBadReward, "reward.json is an empty object: it holds no score")
	}
	scores := make(map[string]float64, len(raw))
	for k, v := range raw {
		var f float64
		if err := json.Unmarshal(v, &f); err != nil || string(v) == "null" {
			return nil, causef(CauseBadReward, "reward.json's %q is %s, not a number", k, cutShort(string(v)))
		}
		scores[k] = f
	}
	return scores, nil
}

// quoteShort quotes s, cut to a length an error message can hold.
func quoteShort(s string) string { return strconv.Quote(cutShort(s)) }

func cutShort(s string) string {
	const max = 100
	if len(s) > max {
		return strings.ToValidUTF8(s[:max], "") + "..."
	}
	return s
}

// within reports whether path is dir or inside it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// emptyFolder makes dir and removes what it holds (it may be a mount
// point, so it is emptied rather than replaced).
func emptyFolder(dir string) error {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// replaceWithArchive unpacks a gzip tar into a fresh folder beside dir,
// then puts it in dir's place, so a bad archive leaves dir as it was.
func replaceWithArchive(dir string, archive []byte) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return causef(CauseInternal, "making %s: %v", parent, err)
	}
	stage, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".unpack-")
	if err != nil {
		return causef(CauseInternal, "making a folder beside %s: %v", dir, err)
	}
	defer os.RemoveAll(stage) // gone once renamed
	if err := untar(stage, archive); err != nil {
		return causef(CauseBadRequest, "files_tgz_b64: %v", err)
	}
	if err := os.Chmod(stage, 0o755); err != nil {
		return causef(CauseInternal, "%v", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return causef(CauseInternal, "removing the old %s: %v", dir, err)
	}
	if err := os.Rename(stage, dir); err != nil {
		return causef(CauseInternal, "moving the tests into %s: %v", dir, err)
	}
	return nil
}

// untar writes a gzip tar's folders, files and symlinks under dir; an
// entry that would land outside dir is refused.
func untar(dir string, archive []byte) error {
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return fmt.Errorf("not a gzip archive: %w", err)
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the tar: %w", err)
		}
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if name == "." {
			continue
		}
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
			return fmt.Errorf("entry %q points outside the tests folder", h.Name)
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		// A symlink the archive made earlier must not lead a later entry out.
		if real, err := filepath.EvalSymlinks(filepath.Dir(p)); err != nil || !within(real, root) {
			return fmt.Errorf("entry %q points outside the tests folder (through a symlink)", h.Name)
		}
		mode := os.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			if err := os.Chmod(p, mode|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode|0o600)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				return fmt.Errorf("entry %q: %w", h.Name, err)
			}
			if err := f.Close(); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q is of a type the verifier does not unpack (%q): only folders, files and symlinks", h.Name, h.Typeflag)
		}
	}
}
