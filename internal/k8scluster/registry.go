package k8scluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
)

// The cluster's image registry: distribution's registry (the CNCF
// reference implementation, a Go program), built from the Go module proxy
// like the Kubernetes binaries, running in the control plane's network
// namespace on its address, storing blobs in the state folder. Both
// nodes' containerd pull from it over plain HTTP.
const (
	// RegistryVersion is the distribution release the harness builds.
	RegistryVersion = "v3.1.2"
	// registryPackage is its command.
	registryPackage = "github.com/distribution/distribution/v3/cmd/registry"
	// RegistryHost is the registry host images on the cluster's registry
	// are named under (registry.agentenv.test/NAME:TAG). .test never
	// resolves (RFC 2606), so the name cannot reach a real registry; each
	// node's containerd maps it to the registry's address (hosts.toml),
	// and the pusher to cluster.json's, so one image name works on every
	// harness cluster whatever its addresses.
	RegistryHost = "registry.agentenv.test"
	// RegistryPort is the registry's port on the control plane's address.
	RegistryPort = 5000
	// CapRegistry: the cluster runs a registry its nodes pull from
	// (Info.Registry); images named under RegistryHost are pulled from it.
	CapRegistry = "registry"
)

// RegistryBinary is where the registry of RegistryVersion is cached:
// ${AGENTENV_K8S_CACHE:-$HOME/.cache/agentenv-k8s}/distribution-<version>/bin/registry.
func RegistryBinary() string {
	return filepath.Join(CacheDir(), "distribution-"+RegistryVersion, "bin", "registry")
}

// RegistryAddr is the registry's host:port, on the control plane's address:
// the host reaches it over its link, the nodes through their default route.
func (c Config) RegistryAddr() string {
	return net.JoinHostPort(c.NodeIP().String(), strconv.Itoa(RegistryPort))
}

// registryAddon is distribution's registry of RegistryVersion.
var registryAddon = addon{name: "the image registry", version: RegistryVersion, versionFlag: "--version",
	reports: " " + RegistryVersion, cold: "~8 CPU-minutes"}

// CheckRegistry reports whether bin is the registry of RegistryVersion.
func CheckRegistry(bin string) error { return registryAddon.check(bin) }

// BuildRegistry builds distribution's registry of RegistryVersion from the
// Go module proxy (`go install PKG@VERSION`, outside any module) into a
// temporary folder beside bin and renames it in, unless bin already is it.
func BuildRegistry(ctx context.Context, bin string, log hclog.Logger) error {
	return registryAddon.build(ctx, bin, func(dir, _ string) *exec.Cmd {
		ld := "-s -w -X github.com/distribution/distribution/v3/version.version=" + RegistryVersion
		cmd := exec.CommandContext(ctx, "nice", "-n", "10", "go", "install", "-trimpath", "-ldflags", ld, registryPackage+"@"+RegistryVersion)
		cmd.Dir = dir // outside any module: PKG@VERSION ignores go.work and go.mod
		cmd.Env = append(os.Environ(), "GOBIN="+dir, "CGO_ENABLED=0", "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false", "GOWORK=off")
		return cmd
	}, log)
}

// registryConfig keeps the registry's storage in the state folder, so Down
// removes every image pushed. Deletes are allowed (tests remove tags).
func (c Config) registryConfig() string {
	return fmt.Sprintf(`version: 0.1
log:
  level: info
  formatter: text
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %q
  delete:
    enabled: true
http:
  addr: %q
`, c.path("registry", "data"), c.RegistryAddr())
}

// registryHosts is a node's containerd hosts.toml for one registry host
// name: pull and resolve over plain HTTP from the registry's address.
func (c Config) registryHosts() string {
	u := "http://" + c.RegistryAddr()
	return fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", u, u)
}

// registryHostsDir is the node's containerd config_path.
func (n node) registryHostsDir() string { return n.path("containerd", "certs.d") }

// writeRegistryHosts maps both RegistryHost and the registry's address to
// the registry over HTTP in n's containerd (a plain host:port name would
// otherwise be tried over HTTPS).
func (n node) writeRegistryHosts() error {
	for _, host := range []string{RegistryHost, n.c.RegistryAddr()} {
		if err := os.MkdirAll(filepath.Join(n.registryHostsDir(), host), 0o755); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(n.registryHostsDir(), host, "hosts.toml"), []byte(n.c.registryHosts()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// startRegistry starts the registry in the control plane's namespace and
// waits until its API answers from the host.
func (u *upRun) startRegistry(ctx context.Context) error {
	c := u.c
	if err := os.MkdirAll(c.path("registry", "data"), 0o755); err != nil {
		return err
	}
	conf := c.path("registry", "config.yml")
	if err := writeFile(conf, []byte(c.registryConfig()), 0o644); err != nil {
		return err
	}
	for _, n := range c.nodes() {
		if err := n.writeRegistryHosts(); err != nil {
			return err
		}
	}
	// OTEL_TRACES_EXPORTER=none: distribution exports traces over OTLP by
	// default, to a collector that is not there.
	if err := u.start(ctx, "registry", nil, "env", "OTEL_TRACES_EXPORTER=none", RegistryBinary(), "serve", conf); err != nil {
		return err
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	return u.poll(ctx, "registry", time.Minute, 100*time.Millisecond, func() (bool, error) {
		resp, err := hc.Get("http://" + c.RegistryAddr() + "/v2/")
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("/v2/: %s", resp.Status)
	})
}
