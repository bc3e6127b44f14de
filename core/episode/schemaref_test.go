package episode

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// A tool schema's $ref to a file is not followed: the env cannot make the
// engine read host files. (Refs within the schema still work.)
func TestToolSchemaRefsStayInside(t *testing.T) {
	file := filepath.Join(t.TempDir(), "string.json")
	if err := os.WriteFile(file, []byte(`{"type": "string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, schema, args string
		wantErr            bool
	}{
		// Were the file read, {} (not a string) would be refused.
		{"file ref ignored", `{"$ref": "file://` + file + `"}`, `{}`, false},
		{"internal ref followed", `{"$defs": {"n": {"type": "integer"}}, "type": "object", "properties": {"n": {"$ref": "#/$defs/n"}}}`, `{"n": "x"}`, true},
		{"internal ref passes", `{"$defs": {"n": {"type": "integer"}}, "type": "object", "properties": {"n": {"$ref": "#/$defs/n"}}}`, `{"n": 3}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := &offered{tool: Tool{Name: "t", Parameters: json.RawMessage(tc.schema)}}
			if _, err := o.validate(json.RawMessage(tc.args)); (err != nil) != tc.wantErr {
				t.Fatalf("validate(%s) = %v, want error %v", tc.args, err, tc.wantErr)
			}
		})
	}
}

// A tool's schema is compiled once for every episode that offers it, and
// per tool name: the name is in the schema's URL.
func TestSchemaCompiledOnce(t *testing.T) {
	params := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)
	a := &offered{tool: Tool{Name: "compiled_once", Parameters: params}}
	b := &offered{tool: Tool{Name: "compiled_once", Parameters: append(json.RawMessage(nil), params...)}}
	other := &offered{tool: Tool{Name: "compiled_once_too", Parameters: params}}
	for _, o := range []*offered{a, b, other} {
		if _, err := o.validate(json.RawMessage(`{"n": 1}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := o.validate(json.RawMessage(`{"n": "1"}`)); err == nil {
			t.Fatal("a string passed an integer's schema")
		}
	}
	if a.schema == nil || a.schema != b.schema || a.schema == other.schema {
		t.Fatalf("schemas %p %p %p: want the first two one compiled schema, the third its own", a.schema, b.schema, other.schema)
	}
}
