package k8scluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// CheckBinaries reports whether dir holds the components of Version,
// each answering --version with it.
func CheckBinaries(dir string) error {
	bad, _ := checkBinaries(dir, Components)
	if len(bad) > 0 {
		return fmt.Errorf("kubernetes binaries in %s: %s", dir, strings.Join(bad, "; "))
	}
	return nil
}

// checkBinaries lists what is wrong with dir's copies of components, and
// which of them are missing or wrong.
func checkBinaries(dir string, components []string) (bad, names []string) {
	for _, name := range components {
		p := filepath.Join(dir, name)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, p, "--version").CombinedOutput()
		cancel()
		switch {
		case errors.Is(err, fs.ErrNotExist):
			bad = append(bad, name+" missing")
		case err != nil:
			bad = append(bad, fmt.Sprintf("%s --version: %v", name, err))
		case !strings.Contains(string(out), "Kubernetes "+Version):
			bad = append(bad, fmt.Sprintf("%s is %q, not %s", name, strings.TrimSpace(string(out)), Version))
		default:
			continue
		}
		names = append(names, name)
	}
	return bad, names
}

// BuildBinaries builds the components of Version from the Go module proxy
// through the wrapper module in srcDir (internal/k8scluster/k8sbuild) into
// binDir, but those binDir already holds (a component added to the list
// later is built alone). It builds into a temporary folder beside binDir
// and renames it, so binDir is complete or absent; a component built alone
// is checked there and renamed into binDir by itself, so a cluster running
// from binDir never finds one of its binaries missing. The cold build of
// the first four is ~32 CPU-minutes; it logs progress every minute.
func BuildBinaries(ctx context.Context, srcDir, binDir string, log hclog.Logger) error {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	_, todo := checkBinaries(binDir, Components)
	if len(todo) == 0 {
		log.Info("kubernetes binaries cached", "dir", binDir)
		return nil
	}
	if _, err := os.Stat(filepath.Join(srcDir, "go.mod")); err != nil {
		return fmt.Errorf("the wrapper module: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(binDir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(binDir), "bin.tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ld := "-s -w"
	for _, p := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		ld += fmt.Sprintf(" -X %[1]s.gitVersion=%[2]s -X %[1]s.gitMajor=1 -X %[1]s.gitMinor=37 -X %[1]s.gitTreeState=clean -X %[1]s.buildDate=2026-01-01T00:00:00Z", p, Version)
	}
	args := []string{"-n", "10", "go", "build", "-v", "-trimpath", "-ldflags", ld, "-o", tmp + "/"}
	for _, c := range todo {
		args = append(args, "k8s.io/kubernetes/cmd/"+c)
	}
	cmd := exec.CommandContext(ctx, "nice", args...)
	cmd.Dir = srcDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local", "GOFLAGS=-mod=readonly -buildvcs=false", "GOWORK=off")
	logPath := filepath.Join(filepath.Dir(binDir), "build.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	log.Info("building kubernetes binaries (cold: ~20 min on 2 idle cores)", "version", Version, "components", strings.Join(todo, " "), "into", binDir, "log", logPath)
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		pw.Close()
		pr.Close()
		return fmt.Errorf("go build: %w", err)
	}
	pw.Close()
	var pkgs atomic.Int64
	var last atomic.Value
	last.Store("")
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			pkgs.Add(1)
			last.Store(sc.Text())
		}
	}()
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	werr := make(chan error, 1)
	go func() { <-done; werr <- cmd.Wait() }()
	for {
		select {
		case <-tick.C:
			log.Info("still building", "elapsed", time.Since(t0).Round(time.Second), "packages", pkgs.Load(), "last", last.Load())
			continue
		case err = <-werr:
		}
		break
	}
	pr.Close()
	if err != nil {
		return fmt.Errorf("build kubernetes %s: %w; the end of %s:\n%s", Version, err, logPath, tail(logPath, 30))
	}
	if len(todo) < len(Components) {
		// Some are cached, and a running cluster may be starting them:
		// each new one is renamed in alone, so binDir never lacks one.
		if bad, _ := checkBinaries(tmp, todo); len(bad) > 0 {
			return fmt.Errorf("kubernetes binaries in %s: %s", tmp, strings.Join(bad, "; "))
		}
		for _, c := range todo {
			if err := os.Rename(filepath.Join(tmp, c), filepath.Join(binDir, c)); err != nil {
				return err
			}
		}
		if err := CheckBinaries(binDir); err != nil {
			return err
		}
	} else {
		if err := CheckBinaries(tmp); err != nil {
			return err
		}
		if err := os.RemoveAll(binDir); err != nil {
			return err
		}
		if err := os.Rename(tmp, binDir); err != nil {
			return err
		}
	}
	log.Info("kubernetes binaries built", "took", time.Since(t0).Round(time.Second), "dir", binDir)
	return nil
}
