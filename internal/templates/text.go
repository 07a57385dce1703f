package templates

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// decodeJSON reads one JSON value keeping numbers exact.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func clip(s string) string { return clipN(s, 80) }

// clipN shortens s to at most max bytes and an ellipsis, on a rune boundary.
func clipN(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
