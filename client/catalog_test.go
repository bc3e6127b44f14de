package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// What a server says about its catalogue is checked before a caller sizes
// anything by it: a split of -1 tasks, a page longer than asked.
func TestCatalogAnswersAreChecked(t *testing.T) {
	answers := map[string]string{
		"/splits":            `{"splits": [{"name": "all", "size": 2}, {"name": "eval", "size": -1}]}`,
		"/splits/all/tasks":  `{"split": "all", "size": 2, "start": 0, "stop": 1, "tasks": [{"index": 0, "task_id": "a"}, {"index": 1, "task_id": "b"}]}`,
		"/splits/neg/tasks":  `{"split": "neg", "size": -5, "start": 0, "stop": 0, "tasks": []}`,
		"/splits/fine/tasks": `{"split": "fine", "size": 2, "start": 0, "stop": 2, "tasks": [{"index": 0, "task_id": "a"}, {"index": 1, "task_id": "b"}]}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(answers[r.URL.Path]))
	}))
	defer srv.Close()
	c, err := New(srv.URL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Splits(ctx); err == nil || !strings.Contains(err.Error(), `split "eval" has -1 tasks`) {
		t.Errorf("Splits: %v", err)
	}
	if _, err := c.Tasks(ctx, "all", 0, 1); err == nil || !strings.Contains(err.Error(), "2 tasks of a split of 2 for [0, 1)") {
		t.Errorf("a page longer than asked: %v", err)
	}
	if _, err := c.Tasks(ctx, "neg", 0, -1); err == nil || !strings.Contains(err.Error(), "split of -5") {
		t.Errorf("a negative size: %v", err)
	}
	if p, err := c.Tasks(ctx, "fine", 0, -1); err != nil || len(p.Tasks) != 2 {
		t.Errorf("a good page: %+v, %v", p, err)
	}
}
