package skyrl

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A server that still builds its envs answers 503 PREPARING: the catalogue
// waits it out, telling OnPreparing what builds, and reads the answer once
// the server is ready; a context that ends first says what it waited for.
func TestHTTPCatalogWaitsOutPreparing(t *testing.T) {
	var ready atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ready.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"detail": "still preparing: env gridsim is building (3s so far); retry shortly", "code": "PREPARING"}`))
			return
		}
		w.Write([]byte(`{"splits": [{"name": "all", "size": 3}]}`))
	}))
	defer srv.Close()
	cat, err := NewHTTPCatalog(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	cat.preparingPause = time.Millisecond
	var told []string
	cat.OnPreparing = func(msg string) {
		told = append(told, msg)
		ready.Store(true) // the build ends once the client was told
	}
	splits, err := cat.Splits(context.Background())
	if err != nil || len(splits) != 1 || splits[0].Size != 3 {
		t.Fatalf("splits %+v, %v", splits, err)
	}
	if len(told) != 1 || !strings.Contains(told[0], "env gridsim is building") {
		t.Fatalf("told %q", told)
	}

	ready.Store(false)
	cat.OnPreparing = nil
	ctx, cancel := context.WithCancel(context.Background())
	cat.OnPreparing = func(string) { cancel() }
	_, err = cat.Splits(ctx)
	if err == nil || !strings.Contains(err.Error(), "gave up waiting for the server to finish preparing") || !strings.Contains(err.Error(), "env gridsim is building") {
		t.Fatalf("cut short: %v", err)
	}
}
