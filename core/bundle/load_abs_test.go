package bundle

import (
	"os"
	"path/filepath"
	"testing"
)

// A bundle loaded by a relative path still hands sandboxes an absolute
// env folder: they run the env from a folder of their own.
func TestEnvDirIsAbsolute(t *testing.T) {
	abs, err := filepath.Abs("testdata/singleturn")
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	rel, err := filepath.Rel(wd, abs)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(rel, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, env := range b.Envs {
		if want := filepath.Join(abs, "envs", name); env.Dir != want {
			t.Errorf("env %s Dir = %q, want %q", name, env.Dir, want)
		}
	}
	if len(b.Envs) == 0 {
		t.Fatal("test bundle has no envs")
	}
}
