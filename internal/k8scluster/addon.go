package k8scluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// addon is a pinned program the cluster runs beside Kubernetes (kube-router,
// the image registry, CoreDNS): built from the Go module proxy, cached by
// version, and known by what its version flag prints.
type addon struct {
	name, version string
	versionFlag   string // "-version" or "--version"
	reports       string // in its version output when it is this version
	cold          string // the cold build's cost, for the log
}

// check reports whether bin is the addon at its version.
func (a addon) check(bin string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, a.versionFlag).CombinedOutput()
	got := strings.TrimSpace(string(out))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s is missing at %s", a.name, a.version, bin)
	case err != nil:
		return fmt.Errorf("%s %s: %w: %s", bin, a.versionFlag, err, got)
	case !strings.Contains(string(out), a.reports):
		return fmt.Errorf("%s is %q, not %s %s", bin, got, a.name, a.version)
	}
	return nil
}

// build makes bin unless it already is the addon: command(dir, out) writes
// the binary at out inside a temporary folder dir beside bin; what it wrote
// is checked, then renamed in. The command's output goes to build.log in
// the folder above bin's, whose tail a failure quotes.
func (a addon) build(ctx context.Context, bin string, command func(dir, out string) *exec.Cmd, log hclog.Logger) error {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if a.check(bin) == nil {
		log.Info(a.name+" cached", "bin", bin)
		return nil
	}
	dir := filepath.Dir(bin)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	built := filepath.Join(tmp, filepath.Base(bin))
	logPath := filepath.Join(filepath.Dir(dir), "build.log")
	log.Info("building "+a.name+" (cold: "+a.cold+")", "version", a.version, "into", bin, "log", logPath)
	t0 := time.Now()
	out, err := command(tmp, built).CombinedOutput()
	_ = os.WriteFile(logPath, out, 0o644)
	if err != nil {
		return fmt.Errorf("build %s %s: %w; the end of %s:\n%s", a.name, a.version, err, logPath, tail(logPath, 30))
	}
	if err := a.check(built); err != nil {
		return err
	}
	if err := os.Rename(built, bin); err != nil {
		return err
	}
	log.Info(a.name+" built", "took", time.Since(t0).Round(time.Second), "bin", bin)
	return nil
}

// wrapperBuild is `go build` of pkg in the wrapper module srcDir (its
// go.mod pins the addon's version), static and niced, writing out.
func wrapperBuild(ctx context.Context, srcDir, ldflags, pkg, out string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "nice", "-n", "10", "go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, pkg)
	cmd.Dir = srcDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local", "GOFLAGS=-mod=readonly -buildvcs=false", "GOWORK=off")
	return cmd
}
