// Package output holds what regosched's reporting commands (explain, audit)
// share: the -o formats and how JSON is written.
package output

import (
	"encoding/json"
	"fmt"
	"io"
)

// Format is an output format of a command's report.
type Format string

// Output formats.
const (
	Table Format = "table"
	JSON  Format = "json"
)

// ParseFormat checks an -o value.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case Table, JSON:
		return f, nil
	}
	return "", fmt.Errorf("unknown output format %q: want table or json", s)
}

// WriteJSON writes v to w, indented, as the JSON format does.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}
