package sdktest

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/sdk/config"
)

// ConfigSchemaMatches checks that a plugin's configuration JSON Schema (an
// object schema, as Info().ConfigSchema) and its config struct (what
// config.Decode fills) name the same keys, so neither can gain a setting
// the other lacks. cfg is the struct or a pointer to it.
func ConfigSchemaMatches(t testing.TB, schema json.RawMessage, cfg any) {
	t.Helper()
	var doc struct {
		Type                 string                     `json:"type"`
		Properties           map[string]json.RawMessage `json:"properties"`
		AdditionalProperties *bool                      `json:"additionalProperties"`
	}
	if err := json.Unmarshal(schema, &doc); err != nil {
		t.Fatalf("config schema is not JSON: %v", err)
	}
	if doc.Type != "object" {
		t.Errorf("config schema type is %q, want \"object\"", doc.Type)
	}
	if doc.AdditionalProperties == nil || *doc.AdditionalProperties {
		t.Errorf("config schema allows keys it does not list: set \"additionalProperties\": false, so a misspelt setting is refused")
	}
	typ := reflect.TypeOf(cfg)
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	fields := config.Fields(typ)
	var onlySchema, onlyStruct []string
	for k := range doc.Properties {
		if _, ok := fields[k]; !ok {
			onlySchema = append(onlySchema, k)
		}
	}
	for k := range fields {
		if _, ok := doc.Properties[k]; !ok {
			onlyStruct = append(onlyStruct, k)
		}
	}
	sort.Strings(onlySchema)
	sort.Strings(onlyStruct)
	if len(onlySchema) > 0 {
		t.Errorf("config schema has settings %s that %s has no field for", strings.Join(onlySchema, ", "), typ)
	}
	if len(onlyStruct) > 0 {
		t.Errorf("%s has settings %s that the config schema does not list", typ, strings.Join(onlyStruct, ", "))
	}
}
