package templates

import (
	"bytes"
	"encoding/json"

	"github.com/planbus/planbus/internal/text"
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

func clip(s string) string { return text.Clip(s, 80) }
