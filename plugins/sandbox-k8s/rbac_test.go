package k8s

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/agentenv/agentenv/internal/k8scluster"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

const rbacFile = "../../deploy/kubernetes/rbac.yaml"

// authorizationOnly are permissions no request shows as its verb, that the
// API server still checks: a WebSocket exec is a GET (verb get), and its
// upgrade is authorized as create too.
var authorizationOnly = []Permission{{Resource: "pods", Subresource: "exec", Verb: "create"}}

// shippedRole is the Role of deploy/kubernetes/rbac.yaml.
func shippedRole(t *testing.T) rbacv1.Role {
	t.Helper()
	b, err := os.ReadFile(rbacFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%s: %v", rbacFile, err)
		}
		if meta.Kind == "Role" {
			var r rbacv1.Role
			if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
				t.Fatalf("%s: %v", rbacFile, err)
			}
			return r
		}
	}
	t.Fatalf("%s has no Role", rbacFile)
	return rbacv1.Role{}
}

func permissionsOf(r rbacv1.Role) []string {
	var out []string
	for _, rule := range r.Rules {
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				name, sub, _ := strings.Cut(res, "/")
				for _, v := range rule.Verbs {
					out = append(out, Permission{Group: g, Resource: name, Subresource: sub, Verb: v}.String())
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func strs(ps []Permission) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	sort.Strings(out)
	return out
}

// The Role users apply holds exactly the permissions the plugin asks for.
func TestRoleMatchesPermissions(t *testing.T) {
	if got, want := permissionsOf(shippedRole(t)), strs(Permissions); !slices.Equal(got, want) {
		t.Fatalf("%s grants %q; the plugin uses %q", rbacFile, got, want)
	}
}

// recorder notes every API request as the permission it needs.
type recorder struct {
	mu   sync.Mutex
	seen map[string]bool
}

var apiPath = regexp.MustCompile(`^/apis?/(?:([^/]+)/)?v1/namespaces/[^/]+/([^/]+)(?:/([^/]+)(?:/([^/]+))?)?$`)

func (r *recorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if m := apiPath.FindStringSubmatch(req.URL.Path); m != nil {
			group := m[1]
			if strings.HasPrefix(req.URL.Path, "/api/") {
				group = ""
			}
			verb := map[string]string{"POST": "create", "PATCH": "patch", "DELETE": "delete", "PUT": "update"}[req.Method]
			if req.Method == "GET" {
				switch {
				case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
					verb = "watch"
				case m[3] == "":
					verb = "list"
				default:
					verb = "get"
				}
			}
			r.mu.Lock()
			r.seen[Permission{Group: group, Resource: m[2], Subresource: m[4], Verb: verb}.String()] = true
			r.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// bindRole applies role (from rbac.yaml, less the verbs in drop) in ns and
// binds it to user; it returns a kubeconfig of that user.
func bindRole(t *testing.T, c *k8scluster.Cluster, ns, user string, drop ...string) string {
	t.Helper()
	ctx := context.Background()
	role := shippedRole(t)
	role.ObjectMeta = metav1.ObjectMeta{Name: "agentenv-sandbox", Namespace: ns}
	for i := range role.Rules {
		role.Rules[i].Verbs = slices.DeleteFunc(role.Rules[i].Verbs, func(v string) bool { return slices.Contains(drop, v) })
	}
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "agentenv-sandbox", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "agentenv-sandbox"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}}}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c.KubeconfigFile(t, user)
}

// A user with exactly the shipped Role passes the whole conformance suite,
// and the requests it makes need no permission the Role lacks; every
// permission of the Role is used.
func TestClusterShippedRoleIsEnough(t *testing.T) {
	c := k8scluster.Require(t)
	listener(t, c)
	ns := c.Namespace(t, "sbk8s-rbac")
	kc := bindRole(t, c, ns, "agentenv-rbac-test")
	rec := &recorder{seen: map[string]bool{}}
	wrapTransport = rec.wrap
	t.Cleanup(func() { wrapTransport = nil })
	raw := clusterConfig(t, kc, ns, nil)
	fresh := func() sandbox.Plugin { return configured(t, raw) }
	spec := listenerSpec(nil)
	spec.EnvVars = map[string]string{"TOKEN": "t"}
	sdktest.SandboxConformance(t, fresh(), sdktest.SandboxCase{Spec: spec, ExecCommand: []string{"/listener", "echo", "x"}, ExecStdout: "x token=t", Restart: fresh})
	var used []string
	for p := range rec.seen {
		used = append(used, p)
	}
	sort.Strings(used)
	want := map[string]bool{}
	for _, p := range Permissions {
		want[p.String()] = true
	}
	for _, u := range used {
		if !want[u] {
			t.Errorf("the plugin made a request needing %q, which Permissions lacks", u)
		}
	}
	for _, p := range Permissions {
		if !rec.seen[p.String()] && !slices.Contains(authorizationOnly, p) {
			t.Errorf("Permissions (and the Role) hold %q, which no request used", p)
		}
	}
	t.Logf("requests needed: %s", strings.Join(used, ", "))
	waitClean(t, c, ns, time.Minute)
}

// Without delete: the access check at Configure names what is missing;
// skipping it, a Terminate fails naming the verb and resource to grant.
func TestClusterRBACWithoutDelete(t *testing.T) {
	c := k8scluster.Require(t)
	listener(t, c)
	ns := c.Namespace(t, "sbk8s-nodel")
	kc := bindRole(t, c, ns, "agentenv-nodelete", "delete")
	err := New().Configure(context.Background(), clusterConfig(t, kc, ns, nil))
	if err == nil || !strings.Contains(err.Error(), "user agentenv-nodelete may not delete pods in namespace "+ns) {
		t.Fatalf("Configure without delete: %v", err)
	}
	p := configured(t, clusterConfig(t, kc, ns, map[string]any{"check_access": false}))
	ctx := context.Background()
	sb, err := p.Deploy(ctx, listenerSpec(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = p.Terminate(ctx, sb)
	if err == nil || !strings.Contains(err.Error(), `forbidden: the plugin may not delete pods there; add verb "delete" on "pods"`) || !strings.Contains(err.Error(), sb.ID) {
		t.Fatalf("Terminate without delete: %v", err)
	}
	b, _ := json.Marshal(err.Error())
	t.Logf("error: %s", b)
}
