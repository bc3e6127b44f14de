package episode

import (
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var schemaPrinter = message.NewPrinter(language.English)

// schemaError words a validation error for the model: each failure with
// the place in the arguments, without the schema's internal URL. At most
// SchemaErrorsShown failures are listed; the rest are counted, so an
// array of a million bad items costs one short message.
func schemaError(err error) error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	msgs, more := schemaFailures(ve, SchemaErrorsShown)
	if len(msgs) == 0 {
		return err
	}
	s := strings.Join(msgs, "; ")
	if more > 0 {
		s += fmt.Sprintf("; and %d more", more)
	}
	return errors.New(s)
}

// schemaFailures walks the error tree depth-first and words its failures
// ("at /a/0: got string, want number"), the first max of them; more counts
// the rest. Grouping nodes (the schema, a $ref, "validation failed") are
// not failures of their own: their causes are.
func schemaFailures(root *jsonschema.ValidationError, max int) (msgs []string, more int) {
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 || !isGrouping(e.ErrorKind) {
			if len(msgs) < max {
				msgs = append(msgs, fmt.Sprintf("at %s: %s", pointer(e.InstanceLocation), e.ErrorKind.LocalizedString(schemaPrinter)))
			} else {
				more++
			}
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	if len(root.Causes) == 0 {
		walk(root)
	}
	for _, c := range root.Causes {
		walk(c)
	}
	return msgs, more
}

func isGrouping(k jsonschema.ErrorKind) bool {
	switch k.(type) {
	case *kind.Group, *kind.Schema, *kind.Reference:
		return true
	}
	return false
}

// pointer writes an instance location as a JSON pointer ("/" for the root).
func pointer(loc []string) string {
	if len(loc) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1"))
	}
	return b.String()
}
