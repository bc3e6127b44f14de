// Package config decodes a plugin's JSON configuration into its Go struct,
// strictly: an unknown key or a value of the wrong type is an error naming
// the field, so a plugin author keeps one struct instead of a struct, a
// pointer copy of it and hand-written checks. sdktest.ConfigSchemaMatches
// checks that the struct and the plugin's JSON Schema name the same keys.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"
)

// Decode fills dst (a pointer to a struct holding the defaults) from raw,
// a JSON object whose keys are the struct's json tags. Keys absent from raw
// keep dst's values; null or empty raw changes nothing. Errors name the
// plugin and the key, and list the valid keys for an unknown one:
// `sandbox-local config: grace: 5: a duration is a string with a unit, like "5s"`.
func Decode(plugin string, raw json.RawMessage, dst any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("%s config: Decode needs a pointer to a struct, got %T", plugin, dst)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("%s config: must be a JSON object: %s", plugin, describe(err))
	}
	fields := Fields(v.Elem().Type())
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		idx, ok := fields[k]
		if !ok {
			return fmt.Errorf("%s config: unknown setting %q; the settings are: %s", plugin, k, strings.Join(sortedKeys(fields), ", "))
		}
		f := v.Elem().Field(idx)
		fresh := reflect.New(f.Type())
		fresh.Elem().Set(f)
		dec := json.NewDecoder(bytes.NewReader(doc[k]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(fresh.Interface()); err != nil {
			return fmt.Errorf("%s config: %s: %s", plugin, k, describe(err))
		}
		f.Set(fresh.Elem())
	}
	return nil
}

// Fields maps the JSON keys of struct type t to field indexes: the json
// tag's name, or the field's name; "-" and unexported fields are left out.
func Fields(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = i
	}
	return out
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// describe words a decoding error without encoding/json's prefixes.
func describe(err error) string {
	var typeErr *json.UnmarshalTypeError
	var fieldErr *FieldError
	switch {
	case errors.As(err, &fieldErr):
		return fieldErr.Error()
	case errors.As(err, &typeErr):
		at := ""
		if typeErr.Field != "" {
			at = typeErr.Field + ": "
		}
		return fmt.Sprintf("%sa JSON %s is not allowed here (want %s)", at, typeErr.Value, typeErr.Type)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// FieldError is a bad value of one field, as a field type reports it.
type FieldError struct {
	Value string
	Why   string
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s: %s", e.Value, e.Why) }

// Duration is a time.Duration written in JSON as a Go duration string
// ("5s", "1m30s"). A bare number is refused with a hint, since "5" could be
// seconds or nanoseconds.
type Duration time.Duration

// UnmarshalJSON reads "5s"; a number is an error suggesting "<n>s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return &FieldError{Value: string(b), Why: fmt.Sprintf("a duration is a string with a unit, like \"%ss\"", strings.Trim(string(b), `"`))}
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return &FieldError{Value: fmt.Sprintf("%q", s), Why: "not a duration like \"5s\" or \"1m30s\""}
	}
	if v < 0 {
		return &FieldError{Value: fmt.Sprintf("%q", s), Why: "a duration must not be negative"}
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }
