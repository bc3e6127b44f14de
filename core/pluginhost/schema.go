package pluginhost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
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
		leafErrors(ve, &msgs)
		return fmt.Errorf("invalid config: %s", strings.Join(msgs, "; "))
	}
	return err
}

var printer = message.NewPrinter(language.English)

// leafErrors collects the innermost failures, which name the field.
func leafErrors(ve *jsonschema.ValidationError, out *[]string) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			leafErrors(c, out)
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
	*out = append(*out, fmt.Sprintf("at %q: %s", loc, ve.ErrorKind.LocalizedString(printer)))
}

// oneLine folds a multi-line message onto one line.
func oneLine(s string) string {
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range lines {
		lines[i] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[i]), "- "))
	}
	return strings.Join(lines, "; ")
}
