package qwen3coder

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/agentenv/agentenv/plugins/toolformattest"
)

// pyRow is one string and what CPython made of it (testdata/gen_pyvalues.py).
type pyRow struct {
	In      string  `json:"in"`
	Int     *string `json:"int"`
	Number  *string `json:"number"`
	Literal struct {
		OK   bool   `json:"ok"`
		Why  string `json:"why"`
		JSON string `json:"json"`
	} `json:"literal"`
}

func loadPyRows(t testing.TB) []pyRow {
	t.Helper()
	b, err := os.ReadFile("testdata/pyvalues.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Rows []pyRow }
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("testdata/pyvalues.json: %v", err)
	}
	if len(f.Rows) < 1000 {
		t.Fatalf("testdata/pyvalues.json has only %d rows", len(f.Rows))
	}
	return f.Rows
}

func TestPyIntMatchesCPython(t *testing.T) {
	for _, r := range loadPyRows(t) {
		got, ok := pyInt(r.In)
		switch {
		case r.Int == nil && ok:
			t.Errorf("pyInt(%q) = %s, CPython int() raises", r.In, got)
		case r.Int != nil && !ok:
			t.Errorf("pyInt(%q) fails, CPython int() = %s", r.In, *r.Int)
		case r.Int != nil && got != *r.Int:
			t.Errorf("pyInt(%q) = %s, CPython int() = %s", r.In, got, *r.Int)
		}
	}
}

func TestPyFloatMatchesCPython(t *testing.T) {
	for _, r := range loadPyRows(t) {
		f, ok := pyFloat(r.In)
		var got string
		if ok {
			if got, ok = floatArgument(f); !ok {
				got, ok = "nonfinite", true
			}
		}
		switch {
		case r.Number == nil && ok:
			t.Errorf("pyFloat(%q) = %s, CPython float() raises", r.In, got)
		case r.Number != nil && !ok:
			t.Errorf("pyFloat(%q) fails, CPython gives %s", r.In, *r.Number)
		case r.Number != nil && got != *r.Number:
			t.Errorf("pyFloat(%q) = %s, CPython gives %s", r.In, got, *r.Number)
		}
	}
}

// literalDifferences are inputs literalEval deliberately fails on where
// CPython reads them (documented in docs/tool-formats.md).
var literalDifferences = map[string]string{
	`'\N{DEGREE SIGN}'`: "no Unicode name table in Go",
}

func TestLiteralEvalMatchesCPython(t *testing.T) {
	for _, r := range loadPyRows(t) {
		out, err := literalJSON(context.Background(), r.In)
		if why, ok := literalDifferences[r.In]; ok {
			if !errors.Is(err, errLiteral) {
				t.Errorf("literalJSON(%q) = %s, %v; want the documented failure (%s)", r.In, out, err, why)
			}
			continue
		}
		lit := r.Literal
		switch {
		case lit.OK && err != nil:
			t.Errorf("literalJSON(%q): %v; CPython gives %s", r.In, err, lit.JSON)
		case !lit.OK && err == nil:
			t.Errorf("literalJSON(%q) = %s; CPython fails (%s)", r.In, out, lit.Why)
		case lit.OK && !toolformattest.SameJSON(out, []byte(lit.JSON)):
			t.Errorf("literalJSON(%q) = %s; CPython gives %s", r.In, out, lit.JSON)
		}
	}
}
