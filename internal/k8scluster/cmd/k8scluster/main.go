// Command k8scluster brings the project's real single-node Kubernetes test
// cluster up and down (see docs/k8s-test-cluster.md):
//
//	go run ./internal/k8scluster/cmd/k8scluster build|up|down|status|env|check-clean|image|kubeconfig
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/internal/k8scluster"
)

const usage = `usage: k8scluster [--state DIR] [--bin DIR] VERB

  build         build the Kubernetes binaries and kube-router into the cache (once per version)
  up [--build]  bring the cluster up (--build: build the binaries first if missing)
  down          tear it down and check nothing is left
  status        say what runs
  env           print shell exports for the tests (eval "$(k8scluster env)")
  check-clean   fail naming anything a cluster left behind
  image --ref REF [--entrypoint PATH] SRC [ARG...]
                import a FROM-scratch image of SRC (static binary or folder)
  push --ref REF [--entrypoint PATH] SRC | --docker IMAGE | --oci TARBALL
                push an image to the cluster's registry as REF (` + k8scluster.RegistryHost + `/NAME:TAG):
                a FROM-scratch image of SRC, a local Docker image, or an OCI layout (or docker save) tarball
  kubeconfig --user NAME [--group G]...
                print a kubeconfig for a user, signed by the cluster CA

Defaults: state folder $AGENTENV_K8S_STATE or /tmp/agentenv-k8s, binaries in
$AGENTENV_K8S_CACHE (or ~/.cache/agentenv-k8s)/` + k8scluster.Version + `/bin, the registry in
distribution-` + k8scluster.RegistryVersion + `/bin there.
`

func main() {
	// node-exec is how Up starts containerd in its own mount namespace.
	if len(os.Args) > 1 && os.Args[1] == "node-exec" {
		nodeExec(os.Args[2:])
		return
	}
	g := flag.NewFlagSet("k8scluster", flag.ExitOnError)
	g.Usage = func() { fmt.Fprint(os.Stderr, usage) }
	var cfg k8scluster.Config
	g.StringVar(&cfg.StateDir, "state", "", "state folder")
	g.StringVar(&cfg.BinDir, "bin", "", "folder of the Kubernetes binaries")
	_ = g.Parse(os.Args[1:])
	if g.NArg() == 0 {
		g.Usage()
		os.Exit(2)
	}
	cfg = cfg.Defaults()
	log := hclog.New(&hclog.LoggerOptions{Name: "k8scluster", Output: os.Stderr, Level: hclog.Info})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runVerb(ctx, cfg, g.Arg(0), g.Args()[1:], log); err != nil {
		fmt.Fprintln(os.Stderr, "k8scluster:", err)
		os.Exit(1)
	}
}

func runVerb(ctx context.Context, cfg k8scluster.Config, verb string, args []string, log hclog.Logger) error {
	switch verb {
	case "build":
		return build(ctx, cfg, log)
	case "up":
		f := flag.NewFlagSet("up", flag.ExitOnError)
		doBuild := f.Bool("build", false, "build the binaries first when they are not cached")
		_ = f.Parse(args)
		if *doBuild {
			if err := build(ctx, cfg, log); err != nil {
				return err
			}
		}
		cl, err := k8scluster.Up(ctx, cfg, k8scluster.UpOptions{Log: log})
		if err != nil {
			return err
		}
		fmt.Println(cl.Info.Kubeconfig)
		return nil
	case "down":
		return k8scluster.Down(ctx, cfg, log)
	case "check-clean":
		if left := k8scluster.CheckClean(cfg); len(left) > 0 {
			return fmt.Errorf("left behind by a cluster:\n  %s", strings.Join(left, "\n  "))
		}
		fmt.Println("clean: nothing of a cluster in", cfg.StateDir, "is left")
		return nil
	case "status":
		return status(ctx, cfg)
	case "env":
		cl, err := k8scluster.Open(cfg.StateDir)
		if err != nil {
			return err
		}
		fmt.Printf("export %s=%s\nexport %s=%s\n", k8scluster.EnvKubeconfig, cl.Info.Kubeconfig, k8scluster.EnvState, cfg.StateDir)
		return nil
	case "image":
		f := flag.NewFlagSet("image", flag.ExitOnError)
		ref := f.String("ref", "", "image reference")
		ep := f.String("entrypoint", "", "entrypoint (default /<binary name>)")
		_ = f.Parse(args)
		if f.NArg() < 1 || *ref == "" || f.NArg() > 1 && *ep == "" {
			return fmt.Errorf("image: want --ref REF [--entrypoint PATH] SRC [ARG...] (ARGs follow the entrypoint)")
		}
		cl, err := k8scluster.Open(cfg.StateDir)
		if err != nil {
			return err
		}
		var eps []string
		if *ep != "" {
			eps = append([]string{*ep}, f.Args()[1:]...)
		}
		return cl.ImportImage(ctx, f.Arg(0), *ref, eps...)
	case "push":
		return push(ctx, cfg, args)
	case "kubeconfig":
		f := flag.NewFlagSet("kubeconfig", flag.ExitOnError)
		user := f.String("user", "", "user name (the certificate's CN)")
		var groups multi
		f.Var(&groups, "group", "group (repeatable)")
		_ = f.Parse(args)
		cl, err := k8scluster.Open(cfg.StateDir)
		if err != nil {
			return err
		}
		b, err := cl.KubeconfigFor(*user, groups...)
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(b)
		return err
	default:
		return fmt.Errorf("unknown verb %q\n%s", verb, usage)
	}
}

func build(ctx context.Context, cfg k8scluster.Config, log hclog.Logger) error {
	repo, err := k8scluster.FindRepo()
	if err != nil {
		return err
	}
	if err := k8scluster.BuildBinaries(ctx, filepath.Join(repo, "internal", "k8scluster", "k8sbuild"), cfg.BinDir, log); err != nil {
		return err
	}
	if err := k8scluster.BuildRegistry(ctx, k8scluster.RegistryBinary(), log); err != nil {
		return err
	}
	if err := k8scluster.BuildKubeRouter(ctx, filepath.Join(repo, "internal", "k8scluster", "netpolbuild"), log); err != nil {
		return err
	}
	return k8scluster.BuildCoreDNS(ctx, filepath.Join(repo, "internal", "k8scluster", "dnsbuild"), k8scluster.CoreDNSBinary(), log)
}

// push sends one image to the cluster's registry: SRC (as `image` builds
// it), a Docker image (docker save), or an OCI layout tarball.
func push(ctx context.Context, cfg k8scluster.Config, args []string) error {
	f := flag.NewFlagSet("push", flag.ExitOnError)
	ref := f.String("ref", "", "image reference on the cluster's registry ("+k8scluster.RegistryHost+"/NAME:TAG)")
	ep := f.String("entrypoint", "", "entrypoint of SRC's image (default /<binary name>)")
	docker := f.String("docker", "", "a local Docker image to push instead of SRC")
	oci := f.String("oci", "", "an OCI image-layout tarball (or a docker save archive) to push instead of SRC")
	_ = f.Parse(args)
	srcs := f.NArg()
	for _, s := range []string{*docker, *oci} {
		if s != "" {
			srcs++
		}
	}
	if f.NArg() > 1 && (*ep == "" || srcs > 1) {
		return fmt.Errorf("push: ARGs after SRC follow --entrypoint: want --ref REF --entrypoint PATH SRC [ARG...]")
	}
	if f.NArg() > 1 {
		srcs -= f.NArg() - 1
	}
	if *ref == "" || srcs != 1 {
		return fmt.Errorf("push: want --ref REF and one of SRC [--entrypoint PATH SRC ARG...], --docker IMAGE, --oci TARBALL")
	}
	cl, err := k8scluster.Open(cfg.StateDir)
	if err != nil {
		return err
	}
	switch {
	case *docker != "":
		err = cl.PushDocker(ctx, *docker, *ref)
	case *oci != "":
		err = cl.PushArchive(ctx, *oci, *ref)
	default:
		var eps []string
		if *ep != "" {
			eps = append([]string{*ep}, f.Args()[1:]...)
		}
		err = cl.PushImage(ctx, f.Arg(0), *ref, eps...)
	}
	if err != nil {
		return err
	}
	fmt.Println(*ref)
	return nil
}

func status(ctx context.Context, cfg k8scluster.Config) error {
	cl, err := k8scluster.Open(cfg.StateDir)
	if err != nil {
		return fmt.Errorf("not up: %w", err)
	}
	b, _ := json.MarshalIndent(cl.Info, "", "  ")
	fmt.Println(string(b))
	for _, p := range k8scluster.ComponentPIDs(cfg) {
		fmt.Printf("%-24s pid %-8d %s\n", p.Name, p.PID, map[bool]string{true: "running", false: "NOT RUNNING"}[p.Running])
	}
	if err := cl.Ping(ctx); err != nil {
		return err
	}
	fmt.Println("ready: apiserver answers, node Ready")
	return nil
}

func nodeExec(args []string) {
	f := flag.NewFlagSet("node-exec", flag.ExitOnError)
	state := f.String("state", "", "state folder")
	index := f.Int("node", 1, "which node (1-based)")
	_ = f.Parse(args)
	if err := k8scluster.NodeExec(*state, *index, f.Args()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }
