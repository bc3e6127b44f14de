// Command rewardv is a test reward plugin, agentenv-reward-v. Its version
// comes from a trailer appended to the binary (versionTrailer), so one
// build serves every version the tests swap between. Combine returns the mean of the
// scores times the configured scale, except for probe keys the tests use:
// "pid" returns the process id, "version" the N of vN, "sleep_ms" sleeps
// first (honouring cancellation), "hold" first waits at the gate (see
// hold), "env:NAME" returns 1 if the variable NAME is set, else 0.
// Configured with "cleanup", its Cleanup writes its pid to that file.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/reward"
)

var version = trailerVersion()

// versionTrailer marks the version line the tests append to a copy of
// the binary: "\n<versionTrailer>vN\n" as its last bytes.
const versionTrailer = "agentenv-test-version="

// trailerVersion reads the version from the binary's last bytes, v0 if
// none is there.
func trailerVersion() string {
	exe, err := os.Executable()
	if err != nil {
		return "v0"
	}
	f, err := os.Open(exe)
	if err != nil {
		return "v0"
	}
	defer f.Close()
	tail := make([]byte, 64)
	if st, err := f.Stat(); err != nil || st.Size() < int64(len(tail)) {
		return "v0"
	} else if _, err := f.ReadAt(tail, st.Size()-int64(len(tail))); err != nil {
		return "v0"
	}
	line := strings.TrimSuffix(string(tail), "\n")
	i := strings.LastIndex(line, "\n"+versionTrailer)
	if i < 0 || !strings.HasSuffix(string(tail), "\n") {
		return "v0"
	}
	return line[i+1+len(versionTrailer):]
}

// logger is the SDK's: the host re-logs its lines under the plugin's name.
var logger = sdk.Logger()

type plugin struct {
	scale float64
	gate  string // folder of the FIFOs "arrived" and "release", for "hold"
	// cleanup, when set, is the file Cleanup writes the process id to.
	cleanup string
}

func (p *plugin) Info() sdk.Info {
	return sdk.Info{Name: "v", Kind: sdk.KindReward, Version: version, ConfigSchema: json.RawMessage(`{
		"type": "object",
		"properties": {
			"scale": {"type": "number", "exclusiveMinimum": 0},
			"gate": {"type": "string"},
			"cleanup": {"type": "string"},
			"pass_env": {"type": "array", "items": {"type": "string"}}
		},
		"additionalProperties": false
	}`)}
}

func (p *plugin) Configure(_ context.Context, config json.RawMessage) error {
	var c struct {
		Scale   *float64
		Gate    string
		Cleanup string
		PassEnv []string `json:"pass_env"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return err
	}
	if c.Scale != nil {
		p.scale = *c.Scale
	}
	p.gate, p.cleanup = c.Gate, c.Cleanup
	logger.Info("configured", "scale", p.scale, "version", version)
	// The other ways a plugin author logs: hclog's default logger, a named
	// logger, and the standard log package (with and without a level).
	hclog.L().Debug("configured (debug)", "scale", p.scale)
	logger.Named("cfg").Warn("scale set", "scale", p.scale)
	log.Printf("std log: scale %v", p.scale)
	log.Printf("[ERROR] std log error: scale %v", p.scale)
	return nil
}

func (p *plugin) Combine(ctx context.Context, scores map[string]float64) (float64, error) {
	if ms, ok := scores["sleep_ms"]; ok {
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		delete(scores, "sleep_ms")
	}
	if _, ok := scores["hold"]; ok {
		if err := p.hold(ctx); err != nil {
			return 0, err
		}
		delete(scores, "hold")
	}
	if _, ok := scores["pid"]; ok {
		return float64(os.Getpid()), nil
	}
	for k := range scores {
		if name, ok := strings.CutPrefix(k, "env:"); ok {
			if _, set := os.LookupEnv(name); set {
				return 1, nil
			}
			return 0, nil
		}
	}
	if _, ok := scores["version"]; ok {
		return strconv.ParseFloat(strings.TrimPrefix(version, "v"), 64)
	}
	if len(scores) == 0 {
		return 0, errors.New("no scores")
	}
	var sum float64
	for _, s := range scores {
		sum += s
	}
	return p.scale * sum / float64(len(scores)), nil
}

// Cleanup (sdk.Cleaner) writes the process id to the configured file.
func (p *plugin) Cleanup() error {
	if p.cleanup == "" {
		return nil
	}
	return os.WriteFile(p.cleanup, []byte(strconv.Itoa(os.Getpid())), 0o644)
}

// hold tells the test that a call arrived (its pid, a line into the FIFO
// gate/arrived, which blocks until the test reads) and waits until the
// test releases it (opens and closes gate/release), so a test holds calls
// in flight for as long as it needs, whatever the machine's load.
func (p *plugin) hold(ctx context.Context) error {
	if p.gate == "" {
		return errors.New("hold: configure a gate folder first")
	}
	done := make(chan error, 1)
	go func() {
		w, err := os.OpenFile(filepath.Join(p.gate, "arrived"), os.O_WRONLY, 0)
		if err != nil {
			done <- err
			return
		}
		_, err = fmt.Fprintf(w, "%d\n", os.Getpid())
		w.Close()
		if err != nil {
			done <- err
			return
		}
		r, err := os.Open(filepath.Join(p.gate, "release"))
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(io.Discard, r)
		r.Close()
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func main() {
	if len(os.Args) > 1 && os.Args[1] != "plugin-serve" {
		fmt.Fprintln(os.Stderr, "usage: rewardv [plugin-serve reward-v]")
		os.Exit(2)
	}
	reward.Serve(&plugin{scale: 1})
}
