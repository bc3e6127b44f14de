package pluginhost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// configSchema is a plugin's compiled configuration schema; nil means the
// plugin takes no configuration.
type configSchema struct {
	s *jsonschema.Schema
}

// compileSchema compiles a plugin's Info.ConfigSchema. An empty schema
// compiles to one that only accepts no configuration.
func compileSchema(raw json.RawMessage) (*configSchema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return &configSchema{}, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("config schema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	const url = "agentenv:///config-schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("config schema: %w", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("config schema does not compile: %s", oneLine(err.Error()))
	}
	return &configSchema{s: s}, nil
}

// isEmptyConfig reports whether config says nothing: absent, null or {}.
func isEmptyConfig(config json.RawMessage) bool {
	t := bytes.TrimSpace(config)
	if len(t) == 0 || string(t) == "null" {
		return true
	}
	var m map[string]json.RawMessage
	return json.Unmarshal(t, &m) == nil && len(m) == 0
}

// normalize returns the document a plugin is configured with: {} for no
// configuration, else config itself.
func normalizeConfig(config json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(config)) == 0 || string(bytes.TrimSpace(config)) == "null" {
		return json.RawMessage("{}")
	}
	return config
}

// validate checks config against the schema. The error names every bad
// field by its JSON pointer, e.g. `at "/scale": got string, want number`.
func (cs *configSchema) validate(config json.RawMessage) error {
	if cs.s == nil {
		if isEmptyConfig(config) {
			return nil
		}
		return errors.New("the plugin takes no configuration, but some was given")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(normalizeConfig(config)))
	if err != nil {
		return fmt.Errorf("config is not JSON: %w", err)
	}
	err = cs.s.Validate(doc)
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		var msgs []string
		cs.leafErrors(ve, &msgs)
		return fmt.Errorf("invalid config: %s", strings.Join(msgs, "; "))
	}
	return err
}

var printer = message.NewPrinter(language.English)

// leafErrors collects the innermost failures, which name the field. An
// unknown key names the valid keys there and the nearest one.
func (cs *configSchema) leafErrors(ve *jsonschema.ValidationError, out *[]string) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			cs.leafErrors(c, out)
		}
		return
	}
	loc := "(top level)"
	if len(ve.InstanceLocation) > 0 {
		// A JSON pointer: keys holding '/' or '~' are escaped (RFC 6901).
		esc := strings.NewReplacer("~", "~0", "/", "~1")
		loc = ""
		for _, tok := range ve.InstanceLocation {
			loc += "/" + esc.Replace(tok)
		}
	}
	if extra, ok := ve.ErrorKind.(*kind.AdditionalProperties); ok {
		if valid := cs.keysAt(ve.InstanceLocation); len(valid) > 0 {
			for _, k := range extra.Properties {
				msg := fmt.Sprintf("at %q: unknown key %q", loc, k)
				if near := nearest(k, valid); near != "" {
					msg += fmt.Sprintf("; did you mean %q?", near)
				}
				*out = append(*out, msg+"; the keys are "+strings.Join(valid, ", "))
			}
			return
		}
	}
	*out = append(*out, fmt.Sprintf("at %q: %s", loc, ve.ErrorKind.LocalizedString(printer)))
}

// keysAt lists, sorted, the properties the schema declares for the object
// at loc (nil when it cannot tell).
func (cs *configSchema) keysAt(loc []string) []string {
	s := cs.s
	for _, tok := range loc {
		for s != nil && s.Ref != nil && len(s.Properties) == 0 {
			s = s.Ref
		}
		if s == nil {
			return nil
		}
		s = s.Properties[tok]
	}
	for s != nil && s.Ref != nil && len(s.Properties) == 0 {
		s = s.Ref
	}
	if s == nil {
		return nil
	}
	keys := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// oneLine folds a multi-line message onto one line.
func oneLine(s string) string {
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range lines {
		lines[i] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[i]), "- "))
	}
	return strings.Join(lines, "; ")
}
