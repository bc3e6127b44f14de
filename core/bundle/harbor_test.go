package bundle_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/bundle"
)

// writeTask writes a Harbor task folder under root; files maps a path in
// the task to its content ("" leaves a file out when it is a default).
func writeTask(t *testing.T, root, name string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(root, name)
	base := map[string]string{
		"task.toml":              "version = \"1.0\"\n[agent]\ntimeout_sec = 30.0\n[verifier]\ntimeout_sec = 20.0\n",
		"instruction.md":         "Do the thing.\n",
		"environment/Dockerfile": "FROM scratch\n",
		"tests/test.sh":          "#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n",
		"solution/solve.sh":      "#!/bin/sh\ntrue\n",
	}
	for k, v := range files {
		base[k] = v
	}
	for rel, content := range base {
		if content == "-" {
			continue
		}
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestHarborDatasetLoads(t *testing.T) {
	root := filepath.Join(t.TempDir(), "mini")
	writeTask(t, root, "alpha", map[string]string{
		"task.toml": `version = "1.0"
[metadata]
difficulty = "easy"
[agent]
timeout_sec = 45.5
[verifier]
timeout_sec = 20.0
env = { MODE = "strict" }
[environment]
build_timeout_sec = 90.0
cpus = 2
memory = "1G"
storage_mb = 2048
allow_internet = false
workdir = "/app"
[future]
key = "Harbor's format grows: unknown tables are read past"
`})
	writeTask(t, root, "beta", nil)
	b, err := bundle.Load(root, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := splitNames(b); strings.Join(got, ",") != "all,mini" {
		t.Fatalf("splits %v, want all and the folder's name", got)
	}
	task, err := b.Task("alpha")
	if err != nil {
		t.Fatal(err)
	}
	if task.Harbor == nil || task.Harbor.SolutionDir == "" {
		t.Fatalf("alpha's Harbor record %+v lacks its solution", task.Harbor)
	}
	var types []string
	for _, s := range task.Steps {
		types = append(types, s.Type)
	}
	if strings.Join(types, ",") != "deploy_env,prompt_agent,verify_tests" {
		t.Fatalf("steps %v", types)
	}
	turn, tests := task.Steps[1], task.Steps[2]
	if turn.Prompt != "Do the thing.\n" || turn.Timeout != 45500*time.Millisecond || strings.Join(turn.Tools, ",") != "shell,editor" {
		t.Errorf("turn: prompt %q timeout %v tools %v", turn.Prompt, turn.Timeout, turn.Tools)
	}
	if tests.Timeout != 20*time.Second || tests.VerifierEnv["MODE"] != "strict" || tests.Script != "/tests/test.sh" || !filepath.IsAbs(tests.TestsDir) {
		t.Errorf("tests step: %+v", tests)
	}
	env := b.Envs["alpha"]
	if !env.Terminal || !env.NoInternet || env.CPU != 2 || env.MemoryMB != 1024 || env.StorageMB != 2048 || env.Workdir != "/app" || env.BuildTimeout != 90*time.Second {
		t.Errorf("env: %+v", env)
	}
	if !strings.HasPrefix(env.Image, bundle.HarborImageRepo+":") {
		t.Errorf("image %q is not named by its context's hash", env.Image)
	}
	// Same build context, same image: built once.
	if b.Envs["beta"].Image != env.Image || b.Envs["beta"].NoInternet {
		t.Errorf("beta's env %+v", b.Envs["beta"])
	}
	if len(b.Toolsets()) != 1 {
		t.Errorf("%d toolsets; every Harbor task offers the same terminal", len(b.Toolsets()))
	}
}

func TestHarborNestedSplits(t *testing.T) {
	root := filepath.Join(t.TempDir(), "bench")
	writeTask(t, filepath.Join(root, "train"), "t1", nil)
	writeTask(t, filepath.Join(root, "train"), "t2", nil)
	writeTask(t, filepath.Join(root, "test"), "t1", map[string]string{"environment/Dockerfile": "FROM scratch\nENV X=1\n"})
	b, err := bundle.Load(root, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(splitNames(b), ","); got != "all,test,train" {
		t.Fatalf("splits %s", got)
	}
	s, _ := b.Split("train")
	if len(s.Tasks) != 2 || s.Tasks[0].ID != "train/t1" {
		t.Fatalf("train split %v", s.Tasks)
	}
	if b.Envs["train.t1"] == nil || b.Envs["test.t1"] == nil || b.Envs["train.t1"].Image == b.Envs["test.t1"].Image {
		t.Fatalf("envs %v: each task its own, named by split and folder, images by content", b.Envs)
	}
}

func TestHarborSingleTaskFolder(t *testing.T) {
	dir := writeTask(t, t.TempDir(), "solo", nil)
	b, err := bundle.Load(dir, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Tasks) != 1 || b.Tasks[0].ID != "solo" {
		t.Fatalf("tasks %v", b.Tasks)
	}
}

func TestHarborBrokenTasksNamed(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "Dockerfile"), []byte("FROM scratch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		files map[string]string
		link  bool // environment/Dockerfile links outside the task
		want  string
	}{
		{"no-instruction", map[string]string{"instruction.md": "-"}, false, "instruction.md: missing"},
		{"empty-instruction", map[string]string{"instruction.md": "  \n"}, false, "instruction.md: empty"},
		{"no-tests", map[string]string{"tests/test.sh": "-"}, false, "test.sh: missing"},
		{"bad-key", map[string]string{"task.toml": "[agent]\ntimeout_sec = \"soon\"\n"}, false, "task.toml:2"},
		{"bad-timeout", map[string]string{"task.toml": "[verifier]\ntimeout_sec = -1.0\n"}, false, "above 0"},
		{"no-dockerfile", map[string]string{"environment/Dockerfile": "-"}, false, "docker_image"},
		{"compose", map[string]string{"environment/docker-compose.yaml": "services: {}\n"}, false, "docker-compose"},
		{"gpu", map[string]string{"task.toml": "[environment]\ngpus = 1\n"}, false, "GPU"},
		{"relative-workdir", map[string]string{"task.toml": "[environment]\nworkdir = \"app\"\n"}, false, "absolute path"},
		{"bad-memory", map[string]string{"task.toml": "[environment]\nmemory = \"lots\"\n"}, false, "size"},
		{"outside", map[string]string{"environment/Dockerfile": "-"}, true, "outside the task folder"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "ds")
			writeTask(t, root, "good", nil)
			dir := writeTask(t, root, c.name, c.files)
			if c.link {
				if err := os.MkdirAll(filepath.Join(dir, "environment"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(filepath.Join(outside, "Dockerfile"), filepath.Join(dir, "environment", "Dockerfile")); err != nil {
					t.Fatal(err)
				}
			}
			_, err := bundle.Load(root, bundle.Options{})
			var le *bundle.LoadError
			if !errors.As(err, &le) {
				t.Fatalf("Load: %v, want a LoadError", err)
			}
			if len(le.Problems) != 1 || !strings.Contains(le.Problems[0].File, c.name) {
				t.Fatalf("problems %v: want one, naming task %s", le.Problems, c.name)
			}
			if got := le.Problems[0].String(); !strings.Contains(got, c.want) {
				t.Fatalf("problem %q does not say %q", got, c.want)
			}
		})
	}
}

func TestHarborMixedLayoutRefused(t *testing.T) {
	root := filepath.Join(t.TempDir(), "mixed")
	writeTask(t, root, "flat", nil)
	writeTask(t, filepath.Join(root, "split"), "inner", nil)
	_, err := bundle.Load(root, bundle.Options{})
	if err == nil || !strings.Contains(err.Error(), "one layout") {
		t.Fatalf("Load: %v", err)
	}
}

func TestHarborIsNotABundle(t *testing.T) {
	if bundle.IsHarbor("../../examples/gridsim") {
		t.Fatal("gridsim read as a Harbor dataset")
	}
	if !bundle.IsHarbor("../../examples/harbor") {
		t.Fatal("examples/harbor not read as a Harbor dataset")
	}
}

func splitNames(b *bundle.Bundle) []string {
	var out []string
	for _, s := range b.Splits {
		out = append(out, s.Name)
	}
	return out
}
