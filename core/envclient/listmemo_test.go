package envclient

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// A listing page read once is read from the memo after: the same tools
// (schemas as the SDK gives them, keys sorted), each caller its own slice;
// a page over the bound is never kept, and the memo stays bounded.
func TestListMemo(t *testing.T) {
	m := listMemo{pages: map[string]listedPage{}}
	raw := json.RawMessage(`{"tools":[{"name":"a","description":"A","inputSchema":{"type":"object","properties":{"z":{},"b":{}}}},null,{"name":"b"}],"nextCursor":"2"}`)
	for i := range 2 {
		tools, next, err := m.page(raw)
		if err != nil || next != "2" || len(tools) != 2 {
			t.Fatalf("read %d: %+v, %q, %v", i, tools, next, err)
		}
		if got := string(tools[0].Parameters); got != `{"properties":{"b":{},"z":{}},"type":"object"}` {
			t.Fatalf("read %d: schema %s", i, got)
		}
		if got := string(tools[1].Parameters); got != `{"type":"object"}` {
			t.Fatalf("read %d: no schema gave %s", i, got)
		}
		tools[0] = Tool{Name: "changed by the caller"}
	}
	if len(m.pages) != 1 {
		t.Fatalf("pages kept: %d", len(m.pages))
	}
	if _, _, err := m.page(json.RawMessage(`{"tools":"x"}`)); err == nil || !strings.Contains(err.Error(), "reading the result") || len(m.pages) != 1 {
		t.Fatalf("a page that is no listing: %v (%d kept)", err, len(m.pages))
	}
	big := json.RawMessage(`{"tools":[{"name":"big","description":"` + strings.Repeat("x", listMemoPage) + `"}]}`)
	if tools, _, err := m.page(big); err != nil || len(tools) != 1 || len(m.pages) != 1 {
		t.Fatalf("a big page: %d tools, %v, %d kept", len(tools), err, len(m.pages))
	}
	for i := range listMemoMax + 3 {
		if _, _, err := m.page(json.RawMessage(`{"tools":[{"name":"t` + strconv.Itoa(i) + `"}]}`)); err != nil {
			t.Fatal(err)
		}
	}
	if len(m.pages) > listMemoMax {
		t.Fatalf("pages kept: %d, bound %d", len(m.pages), listMemoMax)
	}
}
