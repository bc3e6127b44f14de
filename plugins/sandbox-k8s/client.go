package k8s

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Permission is one thing the plugin asks of the API server: an RBAC verb
// on a resource (with its API group and subresource) in the env namespace.
type Permission struct {
	Group       string // "" is the core group
	Resource    string
	Subresource string
	Verb        string
}

// String is the permission as RBAC words it: "delete pods", "create pods/exec".
func (p Permission) String() string {
	r := p.Resource
	if p.Subresource != "" {
		r += "/" + p.Subresource
	}
	if p.Group != "" {
		r += "." + p.Group
	}
	return p.Verb + " " + r
}

// Permissions is every verb the plugin uses, and all it needs: the Role of
// deploy/kubernetes holds exactly these (a test compares the two, and
// another records the requests a whole lifecycle makes against them).
var Permissions = []Permission{
	{Resource: "pods", Verb: "create"},                      // Deploy
	{Resource: "pods", Verb: "get"},                         // Terminate, and Deploy after a lost reply
	{Resource: "pods", Verb: "list"},                        // List (reaping)
	{Resource: "pods", Verb: "watch"},                       // Deploy waits for Running
	{Resource: "pods", Verb: "patch"},                       // Deploy lifts the scheduling gate
	{Resource: "pods", Verb: "delete"},                      // Terminate, and a failed Deploy
	{Resource: "pods", Subresource: "exec", Verb: "create"}, // Exec (SPDY)
	{Resource: "pods", Subresource: "exec", Verb: "get"},    // Exec (WebSocket)
	{Resource: "secrets", Verb: "create"},                   // the env's variables
	{Group: "networking.k8s.io", Resource: "networkpolicies", Verb: "create"},
}

// serviceAccountDir is where a pod's service account credentials are.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// connection is how the plugin reaches the cluster, and from where.
type connection struct {
	rest      *rest.Config
	namespace string // the context's (or the pod's) namespace
	inCluster bool
	source    string // for errors: "in-cluster config", "kubeconfig /x (context y)"
}

// connect builds the client configuration: in-cluster when agentenv runs in
// a pod and no kubeconfig or context is named, else the kubeconfig (the
// named file, else $KUBECONFIG, else ~/.kube/config).
func connect(cfg Config) (connection, error) {
	useInCluster := cfg.InCluster == "always" ||
		cfg.InCluster == "auto" && cfg.Kubeconfig == "" && cfg.Context == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != ""
	if useInCluster {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return connection{}, fmt.Errorf("sandbox-k8s: in-cluster config (agentenv runs in a pod?): %w; outside a cluster set kubeconfig or in_cluster=never", err)
		}
		ns := "default"
		if b, err := os.ReadFile(serviceAccountDir + "/namespace"); err == nil && strings.TrimSpace(string(b)) != "" {
			ns = strings.TrimSpace(string(b))
		}
		return connection{rest: rc, namespace: ns, inCluster: true, source: "in-cluster config (service account " + serviceAccountDir + ")"}, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = cfg.Kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: cfg.Context})
	source := "kubeconfig " + strings.Join(kubeconfigPaths(rules), ":")
	if cfg.Context != "" {
		source += " (context " + cfg.Context + ")"
	}
	rc, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return connection{}, fmt.Errorf("sandbox-k8s: no cluster configured: %s has no cluster and agentenv is not in a pod; set kubeconfig=PATH (and context=NAME), or KUBECONFIG in the server's environment (docs/kubernetes.md)", source)
		}
		return connection{}, fmt.Errorf("sandbox-k8s: reading %s: %w", source, err)
	}
	ns, _, err := cc.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	return connection{rest: rc, namespace: ns, source: source}, nil
}

func kubeconfigPaths(rules *clientcmd.ClientConfigLoadingRules) []string {
	if rules.ExplicitPath != "" {
		return []string{rules.ExplicitPath}
	}
	if len(rules.Precedence) == 0 {
		return []string{"(none)"}
	}
	return rules.Precedence
}

// clientset builds the typed client with the configured rate limits.
func (c connection) clientset(cfg Config) (*kubernetes.Clientset, *rest.Config, error) {
	rc := rest.CopyConfig(c.rest)
	rc.QPS, rc.Burst = float32(cfg.QPS), cfg.Burst
	rc.UserAgent = "agentenv-sandbox-k8s/" + Version
	if wrapTransport != nil {
		rc.Wrap(wrapTransport)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox-k8s: building the client for %s: %w", c.source, err)
	}
	return cs, rc, nil
}

// wrapTransport, when set (by tests), wraps every client's transport: the
// RBAC test records the requests a whole lifecycle makes.
var wrapTransport func(http.RoundTripper) http.RoundTripper

// whoAmI is the user the API server sees ("" when it will not say).
func whoAmI(ctx context.Context, cs kubernetes.Interface) (string, error) {
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", err
	}
	return r.Status.UserInfo.Username, nil
}

// checkAccess asks the API server (SelfSubjectAccessReview) for every
// permission the plugin needs in namespace, and names all that are missing.
func checkAccess(ctx context.Context, cs kubernetes.Interface, namespace, source string) error {
	user, err := whoAmI(ctx, cs)
	if err != nil {
		return unreachable(source, cs, err)
	}
	var (
		mu      sync.Mutex
		missing []string
		errs    []error
		wg      sync.WaitGroup
	)
	for _, p := range Permissions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
				Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
					Namespace: namespace, Verb: p.Verb, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource,
				}},
			}, metav1.CreateOptions{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("asking whether it may %s: %w", p, err))
			case !r.Status.Allowed:
				missing = append(missing, p.String())
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("sandbox-k8s: checking its permissions in namespace %s (%s): %w", namespace, source, errors.Join(errs...))
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		who := "the plugin's user"
		if user != "" {
			who = "user " + user
		}
		return fmt.Errorf("sandbox-k8s: %s may not %s in namespace %s (RBAC): grant them in the Role bound to it (deploy/kubernetes/rbac.yaml has every verb the plugin uses; docs/kubernetes.md, RBAC), or set check_access=false to start anyway",
			who, strings.Join(missing, ", "), namespace)
	}
	return nil
}

// unreachable words an error of the first call to the API server.
func unreachable(source string, cs kubernetes.Interface, err error) error {
	host := ""
	if c, ok := cs.(*kubernetes.Clientset); ok && c.RESTClient() != nil {
		if u := c.RESTClient().Get().URL(); u != nil {
			host = u.Scheme + "://" + u.Host
		}
	}
	var uerr *url.Error
	var nerr net.Error
	if errors.As(err, &uerr) || errors.As(err, &nerr) {
		return fmt.Errorf("sandbox-k8s: cannot reach the Kubernetes API server %s (%s): %w; check that the cluster is up and that kubeconfig and context name it (docs/kubernetes.md, troubleshooting)", host, source, err)
	}
	if apierrors.IsUnauthorized(err) {
		return fmt.Errorf("sandbox-k8s: the Kubernetes API server %s refused the credentials of %s (401): %w", host, source, err)
	}
	return fmt.Errorf("sandbox-k8s: the Kubernetes API server %s (%s): %w", host, source, err)
}

// apiError words a failed API call: a forbidden one names the verb and
// resource to grant, an unreachable server says so.
func (s *setup) apiError(verb, resource string, err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s %s in namespace %s: forbidden: the plugin may not %s %s there; add verb %q on %q to its Role (deploy/kubernetes/rbac.yaml): %w",
			verb, resource, s.ns, verb, resource, verb, resource, err)
	case apierrors.IsNotFound(err) && strings.Contains(err.Error(), "namespaces"):
		return fmt.Errorf("%s %s: namespace %s does not exist: create it (kubectl create namespace %s) or set namespace: %w", verb, resource, s.ns, s.ns, err)
	}
	var uerr *url.Error
	if errors.As(err, &uerr) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s %s: cannot reach the Kubernetes API server (%s): %w", verb, resource, s.conn.source, err)
	}
	return fmt.Errorf("%s %s: %w", verb, resource, err)
}
