package session

import (
	"encoding/json"
	"fmt"
)

// Merge applies patch to target as a deep merge: a null removes the key,
// objects merge recursively, arrays and primitives replace. target is
// modified and returned; a nil target starts empty.
func Merge(target, patch map[string]any) map[string]any {
	if target == nil {
		target = map[string]any{}
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(target, k)
		case map[string]any:
			if tv, ok := target[k].(map[string]any); ok {
				target[k] = Merge(tv, pv)
			} else {
				// A patch object onto a non-object: the object replaces it,
				// with its own nulls dropped.
				target[k] = Merge(nil, pv)
			}
		default:
			target[k] = v
		}
	}
	return target
}

// MergeJSON merges a JSON patch into a JSON document (empty means {}).
func MergeJSON(doc, patch []byte) ([]byte, error) {
	var target, p map[string]any
	if len(doc) > 0 {
		if err := json.Unmarshal(doc, &target); err != nil {
			return nil, fmt.Errorf("session: state is not a JSON object: %w", err)
		}
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, fmt.Errorf("session: patch is not a JSON object: %w", err)
	}
	return json.Marshal(Merge(target, p))
}
