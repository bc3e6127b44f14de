package episode

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
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agentenv/agentenv/core/bundle"
)

// RunTestsTool is the terminal server's hidden tool a verify_tests step
// calls (core/terminal): it is never offered to the model.
const RunTestsTool = "run_tests"

// TerminalCallTimeout bounds one call to a terminal env's tool: its shell
// tool enforces its own timeout (at most 1800 s, core/terminal's
// MaxShellTimeout) and answers after it, so the engine's deadline sits
// past that rather than at ToolCallTimeout.
const TerminalCallTimeout = 30*time.Minute + 30*time.Second

// maxTestsBytes caps a task's tests folder as sent to the env (gzipped).
const maxTestsBytes = 32 << 20

// callTimeout is the deadline of one model tool call on le.
func (e *Engine) callTimeout(le *liveEnv) time.Duration {
	if env := e.cfg.Bundle.Envs[le.name]; env != nil && env.Terminal {
		return max(e.cfg.ToolCallTimeout, TerminalCallTimeout)
	}
	return e.cfg.ToolCallTimeout
}

// verifyScores runs a verifier step and returns its scores by id: one
// (the step's) for every type but verify_tests, whose reward files may
// name several.
func (ep *episode) verifyScores(ctx context.Context, s *bundle.Step) (map[string]float64, error) {
	if s.Type != bundle.StepVerifyTests {
		score, err := ep.verify(ctx, s)
		if err != nil {
			return nil, err
		}
		return map[string]float64{s.ID: score}, nil
	}
	return ep.runTests(ctx, s)
}

// testsVerdict is run_tests' answer.
type testsVerdict struct {
	Scores     map[string]float64 `json:"scores"`
	ExitCode   int                `json:"exit_code"`
	OutputTail string             `json:"output_tail"`
}

// runTests copies the task's tests into its env and runs them there
// (Harbor's verifier): the reward files the script writes are the scores.
// A verifier that runs out of time is the infrastructure's timeout (playing
// again may pass); one that writes no reward or garbage leaves the episode
// unscored, the task's doing.
func (ep *episode) runTests(ctx context.Context, s *bundle.Step) (map[string]float64, error) {
	le, err := ep.env(s.Env)
	if err != nil {
		return nil, err
	}
	tgz, err := packFolder(s.TestsDir, maxTestsBytes)
	if err != nil {
		return nil, fmt.Errorf("packing the task's tests: %w", err)
	}
	secs := int(math.Ceil(s.Timeout.Seconds()))
	if secs <= 0 {
		secs = int(ep.e.cfg.VerifyTimeout / time.Second)
	}
	args, err := json.Marshal(map[string]any{
		"files_tgz_b64": base64.StdEncoding.EncodeToString(tgz),
		"dir":           s.TestsPath,
		"script":        s.Script,
		"env":           orEmpty(s.VerifierEnv),
		"timeout_sec":   secs,
	})
	if err != nil {
		return nil, err
	}
	// The env enforces the script's timeout; this deadline only catches an
	// env that stopped answering.
	deadline := time.Duration(secs)*time.Second + 30*time.Second
	res, err := le.client.CallTool(ctx, RunTestsTool, args, deadline)
	if err != nil {
		return nil, fmt.Errorf("running the tests in env %q: %w", s.Env, err)
	}
	if res.IsError {
		msg := strings.TrimSpace(res.Text)
		if strings.HasPrefix(msg, "timeout:") {
			return nil, timeoutError{fmt.Errorf("the task's tests (%s): %s", s.Script, strings.TrimSpace(strings.TrimPrefix(msg, "timeout:")))}
		}
		return nil, fmt.Errorf("the task's tests (%s) gave no score: %s", s.Script, clip(msg, 2000))
	}
	var v testsVerdict
	if err := json.Unmarshal([]byte(res.Text), &v); err != nil {
		return nil, fmt.Errorf("run_tests in env %q answered %q, not its verdict", s.Env, clip(res.Text, 200))
	}
	if len(v.Scores) == 0 {
		return nil, fmt.Errorf("the task's tests (%s) wrote no score", s.Script)
	}
	for id, score := range v.Scores {
		if math.IsNaN(score) || math.IsInf(score, 0) {
			return nil, fmt.Errorf("the task's tests (%s) wrote %v for %q, not a finite number", s.Script, score, id)
		}
	}
	return v.Scores, nil
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// packFolder is dir as a gzipped tar: regular files and folders, modes
// kept, in name order; links and special files are refused (a task's tests
// are files).
func packFolder(dir string, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	var paths []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir {
			paths = append(paths, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	for _, path := range paths {
		info, err := os.Lstat(path)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		switch {
		case info.IsDir():
			if err := tw.WriteHeader(&tar.Header{Name: rel + "/", Mode: int64(info.Mode().Perm()), Typeflag: tar.TypeDir}); err != nil {
				return nil, err
			}
		case info.Mode().IsRegular():
			if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: int64(info.Mode().Perm()), Size: info.Size(), Typeflag: tar.TypeReg}); err != nil {
				return nil, err
			}
			f, err := os.Open(path)
			if err != nil {
				return nil, err
			}
			_, err = io.Copy(tw, io.LimitReader(f, info.Size()))
			f.Close()
			if err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%s is not a regular file or folder", rel)
		}
		if int64(buf.Len()) > limit {
			return nil, fmt.Errorf("the tests folder is over %d MiB packed", limit>>20)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if int64(buf.Len()) > limit {
		return nil, errors.New("the tests folder is too large")
	}
	return buf.Bytes(), nil
}
