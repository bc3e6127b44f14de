package sdktest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder stands in for the test a helper ends, to see how it ends it.
type recorder struct {
	testing.TB
	fatal, skip, log string
}

func (r *recorder) Helper()       {}
func (r *recorder) Name() string  { return "TestNeedsDocker" }
func (r *recorder) Skip(a ...any) { r.skip = fmt.Sprint(a...) }
func (r *recorder) Log(a ...any)  { r.log = fmt.Sprint(a...) }
func (r *recorder) Fatalf(f string, a ...any) {
	r.fatal = fmt.Sprintf(f, a...)
}

func TestMissing(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		t.Run("CI="+ci, func(t *testing.T) {
			skips := filepath.Join(t.TempDir(), "skips")
			t.Setenv("CI", ci)
			t.Setenv(SkipsFileVar, skips)
			r := &recorder{TB: t}
			Missing(r, "a Docker engine", "dial unix /var/run/docker.sock: no such file", "apt-get install docker.io")
			file, _ := os.ReadFile(skips)
			if ci == "true" {
				if r.fatal == "" || r.skip != "" || len(file) != 0 {
					t.Fatalf("under CI=true: fatal %q skip %q file %q; want a failure only", r.fatal, r.skip, file)
				}
				return
			}
			want := "SKIP TestNeedsDocker: needs a Docker engine: dial unix /var/run/docker.sock: no such file; install: apt-get install docker.io (CI=true fails instead)"
			if r.fatal != "" || r.skip != want || string(file) != want+"\n" {
				t.Fatalf("fatal %q\nskip %q\nfile %q\nwant the skip %q in the file", r.fatal, r.skip, file, want)
			}
			// A second skip adds a line; a part left out goes on, logged.
			Missing(r, "python3", "not found", "apt-get install python3")
			r.skip = ""
			MissingPart(r, "haproxy", "not found", "apt-get install haproxy")
			file, _ = os.ReadFile(skips)
			if wantPart := "SKIP TestNeedsDocker (in part): needs haproxy: not found; install: apt-get install haproxy (CI=true fails instead)"; strings.Count(string(file), "\n") != 3 || r.skip != "" || r.log != wantPart || !strings.HasSuffix(string(file), wantPart+"\n") {
				t.Fatalf("after two skips and a part left out: log %q skip %q, file:\n%s", r.log, r.skip, file)
			}
		})
	}
}
