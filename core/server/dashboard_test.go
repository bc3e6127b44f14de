package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// exportedSeries gathers a server's registry, every series present, and
// returns each metric family's name with its label names.
func exportedSeries(t *testing.T) map[string]map[string]bool {
	t.Helper()
	m := NewMetrics()
	if _, err := New(Options{Player: newFakePlayer(), Catalog: fakeCatalog{}, Metrics: m, PluginRestarts: func() float64 { return 0 }}); err != nil {
		t.Fatal(err)
	}
	m.Prime("local", []string{"gridsim"})
	m.failures.WithLabelValues(CodeExecution)
	m.episodes.WithLabelValues("done")
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	for _, f := range families {
		labels := map[string]bool{"instance": true, "job": true, "le": true} // Prometheus adds instance and job
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		out[f.GetName()] = labels
	}
	return out
}

var (
	metricName = regexp.MustCompile(`\b(agentenv|go|process)_[a-z0-9_]+\b`)
	// selector: a metric name followed by its {label matchers}.
	selector = regexp.MustCompile(`\b((?:agentenv|go|process)_[a-z0-9_]+)\{([^}]*)\}`)
	matcher  = regexp.MustCompile(`([a-z_]+)\s*(?:=~|!~|!=|=)`)
)

// checkQuery reports every metric a PromQL query names that the server
// does not export, and every label it selects on that the metric lacks.
func checkQuery(t *testing.T, where, q string, exported map[string]map[string]bool) {
	t.Helper()
	names := metricName.FindAllString(q, -1)
	if len(names) == 0 {
		t.Errorf("%s: query names no agentenv metric: %s", where, q)
	}
	family := func(name string) (map[string]bool, bool) {
		if l, ok := exported[name]; ok {
			return l, true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok {
				if l, ok := exported[base]; ok {
					return l, true
				}
			}
		}
		return nil, false
	}
	for _, n := range names {
		if _, ok := family(n); !ok {
			t.Errorf("%s: %s is not a metric the server exports (query %s)", where, n, q)
		}
	}
	for _, sel := range selector.FindAllStringSubmatch(q, -1) {
		labels, ok := family(sel[1])
		if !ok {
			continue
		}
		for _, m := range matcher.FindAllStringSubmatch(sel[2], -1) {
			if !labels[m[1]] {
				t.Errorf("%s: %s has no label %q (query %s)", where, sel[1], m[1], q)
			}
		}
	}
}

// Every query of the Grafana dashboard names metrics, and labels, that
// the server exports.
func TestGrafanaDashboardQueriesExportedMetrics(t *testing.T) {
	exported := exportedSeries(t)
	files, err := filepath.Glob("../../deploy/grafana/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboard in deploy/grafana: %v", err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var dash struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
			Templating struct {
				List []struct {
					Name  string `json:"name"`
					Query any    `json:"query"`
				} `json:"list"`
			} `json:"templating"`
		}
		if err := json.Unmarshal(b, &dash); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		queries := 0
		for _, p := range dash.Panels {
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", file, p.Title)
			}
			for _, target := range p.Targets {
				queries++
				checkQuery(t, file+": "+p.Title, target.Expr, exported)
			}
		}
		for _, v := range dash.Templating.List {
			if q, ok := v.Query.(map[string]any); ok {
				checkQuery(t, file+": variable "+v.Name, q["query"].(string), exported)
			}
		}
		if queries < 5 {
			t.Errorf("%s: %d queries; the dashboard lost its panels", file, queries)
		}
	}
}

// The PromQL shown in docs/serving.md names exported metrics too.
func TestServingDocsPromQLNamesExportedMetrics(t *testing.T) {
	exported := exportedSeries(t)
	b, err := os.ReadFile("../../docs/serving.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```promql\n(.*?)```").FindAllStringSubmatch(string(b), -1)
	if len(blocks) == 0 {
		t.Fatal("docs/serving.md shows no ```promql block")
	}
	for _, block := range blocks {
		for _, q := range strings.Split(strings.TrimSpace(block[1]), "\n\n") {
			var lines []string
			for _, l := range strings.Split(q, "\n") {
				if !strings.HasPrefix(strings.TrimSpace(l), "#") {
					lines = append(lines, l)
				}
			}
			if expr := strings.TrimSpace(strings.Join(lines, "\n")); expr != "" {
				checkQuery(t, "docs/serving.md", expr, exported)
			}
		}
	}
}
