// Package k8s is the sandbox plugin that runs each episode's env as a
// Kubernetes pod. Deploy creates the pod (one per env deploy, labelled with
// the deploy's labels, locked down, with activeDeadlineSeconds as a lease
// no dead server outlives), held back by a scheduling gate until its
// NetworkPolicy and the Secret of its variables exist; both are owned by
// the pod, so the garbage collector removes them with it. Deploy then
// watches the pod until it runs and its port answers on the pod IP, and
// fails fast, naming the pod, on what will not get better (an image that
// cannot be pulled, a pod no node can hold, an env killed for its memory, a
// pod deleted or evicted). Terminate deletes the pod; List finds pods by
// their labels; Exec runs commands through pods/exec. The handle holds the
// namespace, pod name and UID only. docs/kubernetes.md is the guide.
package k8s

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/config"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// Version is the plugin's version.
const Version = "0.1.0"

// Name is the plugin's name, as Info says and users write it.
const Name = "k8s"

// Plugin is the Kubernetes sandbox. Its methods are safe for concurrent use.
type Plugin struct {
	log hclog.Logger

	mu     sync.Mutex
	cur    *setup          // nil until Configure
	warned map[string]bool // warnOnce's keys
}

// warnOnce logs a warning the first time key comes up, not every deploy.
func (p *Plugin) warnOnce(key, msg string, args ...any) {
	p.mu.Lock()
	seen := p.warned[key]
	if p.warned == nil {
		p.warned = map[string]bool{}
	}
	p.warned[key] = true
	p.mu.Unlock()
	if !seen {
		p.log.Warn(msg, args...)
	}
}

// setup is one configuration with the client built from it; Configure
// swaps it whole, so a call sees one consistent setup.
type setup struct {
	cfg      Config
	conn     connection
	cs       kubernetes.Interface
	rest     *rest.Config // for pods/exec
	ns       string       // where env pods go
	serverNS string       // where the server's pods are (the policy's peer)
	// owner is every env pod's owner reference: the server's own pod (nil
	// outside a pod, or in another namespace than the envs').
	owner *metav1.OwnerReference
	// ends keeps deleted env pods' last states for Explain (nil with a
	// caller's client, Use).
	ends *ends
}

var (
	_ sandbox.Plugin = (*Plugin)(nil)
	_ sdk.Configurer = (*Plugin)(nil)
)

// New returns the Kubernetes sandbox, unconfigured.
func New() *Plugin { return &Plugin{log: sdk.Logger()} }

// SetLogger replaces the plugin's logger.
func (p *Plugin) SetLogger(l hclog.Logger) { p.log = l }

// Info describes the plugin.
func (p *Plugin) Info() sdk.Info {
	return sdk.Info{Name: Name, Kind: sdk.KindSandbox, Version: Version, ConfigSchema: json.RawMessage(configSchema)}
}

// configureTimeout bounds the access check at Configure.
const configureTimeout = 30 * time.Second

// Configure checks a configuration, connects to the cluster it names and,
// with check_access, asks the API server whether the plugin may do all it
// needs, refusing a configuration that lacks a permission.
func (p *Plugin) Configure(ctx context.Context, raw json.RawMessage) error {
	cfg := DefaultConfig()
	if err := config.Decode("sandbox-k8s", raw, &cfg); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return err
	}
	conn, err := connect(cfg)
	if err != nil {
		return err
	}
	cs, rc, err := conn.clientset(cfg)
	if err != nil {
		return err
	}
	s := newSetup(cfg, conn, cs, rc)
	owner, why, err := ownerOf(cfg, s.ns, os.Getenv)
	if err != nil {
		return err
	}
	if why != "" {
		p.log.Warn("env pods are not owned by the server's pod", "why", why)
	}
	s.owner = owner
	s.ends = newEnds()
	if cfg.CheckAccess {
		cctx, cancel := context.WithTimeout(ctx, configureTimeout)
		defer cancel()
		if err := checkAccess(cctx, cs, s.ns, conn.source); err != nil {
			return err
		}
	}
	p.install(s)
	p.log.Info("configured", "namespace", s.ns, "source", conn.source, "network_policy", cfg.NetworkPolicy,
		"owner_pod", ownerName(owner))
	return nil
}

// Use installs a checked configuration with a client of the caller's (a
// test's fake clientset); Configure does the same with the real one. The
// owner of the env pods is found as Configure finds it (POD_* variables).
func (p *Plugin) Use(cfg Config, cs kubernetes.Interface, rc *rest.Config, namespace string) error {
	cfg = cfg.withDefaults()
	s := newSetup(cfg, connection{rest: rc, namespace: namespace, source: "a client of the caller's"}, cs, rc)
	owner, _, err := ownerOf(cfg, s.ns, os.Getenv)
	if err != nil {
		return err
	}
	s.owner = owner
	p.install(s)
	return nil
}

// ownerName is the owner pod's name for logs ("" for none).
func ownerName(o *metav1.OwnerReference) string {
	if o == nil {
		return ""
	}
	return o.Name
}

func newSetup(cfg Config, conn connection, cs kubernetes.Interface, rc *rest.Config) *setup {
	s := &setup{cfg: cfg, conn: conn, cs: cs, rest: rc, ns: cfg.Namespace, serverNS: cfg.ServerNamespace}
	if s.ns == "" {
		s.ns = conn.namespace
	}
	if s.ns == "" {
		s.ns = "default"
	}
	if s.serverNS == "" {
		s.serverNS = s.ns
		if conn.inCluster {
			s.serverNS = conn.namespace
		}
	}
	return s
}

func (p *Plugin) install(s *setup) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != nil {
		p.cur.ends.close()
	}
	p.cur = s
}

func (p *Plugin) setup() (*setup, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		return nil, errors.New("sandbox-k8s is not configured (agentenv configures it from --sandbox-config; docs/kubernetes.md)")
	}
	return p.cur, nil
}

// state is what a handle's State holds: enough for any plugin process to
// find the pod, and not another that later took its name. No secrets.
type state struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	UID       string `json:"uid"`
}

func (s state) encode() []byte {
	b, _ := json.Marshal(s)
	return b
}

func decodeState(sb sandbox.Sandbox) (state, error) {
	var st state
	if len(sb.State) == 0 || json.Unmarshal(sb.State, &st) != nil || st.Pod == "" || st.Namespace == "" {
		return state{}, fmt.Errorf("sandbox %s: its handle names no pod (not deployed by sandbox-k8s, or already forgotten): %w", sb.ID, sandbox.ErrNotFound)
	}
	return st, nil
}

// sandboxID is the sandbox's id and its pod's name: derived from the
// deploy's labels, so a create retried after a lost reply finds the same
// pod instead of starting a second. Without a deploy label (direct
// callers) each Deploy gets a fresh one.
func sandboxID(labels map[string]string) string {
	deploy := labels[sandbox.LabelDeploy]
	if deploy == "" {
		var b [10]byte
		_, _ = rand.Read(b[:])
		return "k8s-" + hex.EncodeToString(b[:])
	}
	sum := sha256.Sum256([]byte(labels[sandbox.LabelServer] + "\x00" + labels[sandbox.LabelEpisode] + "\x00" + deploy))
	return "k8s-" + hex.EncodeToString(sum[:10])
}
