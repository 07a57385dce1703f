package session

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMergeSeedExamples(t *testing.T) {
	tests := []struct{ name, target, patch, want string }{
		{"nested object merge", `{"a": {"b": 1, "c": 2}}`, `{"a": {"c": 3, "d": 4}}`, `{"a": {"b": 1, "c": 3, "d": 4}}`},
		{"array replacement", `{"items": [1, 2, 3]}`, `{"items": [4, 5]}`, `{"items": [4, 5]}`},
		{"key deletion", `{"a": 1, "b": 2}`, `{"b": null}`, `{"a": 1}`},
		{"add new key", `{"a": 1}`, `{"b": 2}`, `{"a": 1, "b": 2}`},
		{"deletion deep inside", `{"a": {"b": 1, "c": 2}}`, `{"a": {"b": null}}`, `{"a": {"c": 2}}`},
		{"object replaces primitive", `{"a": 1}`, `{"a": {"x": 1, "y": null}}`, `{"a": {"x": 1}}`},
		{"primitive replaces object", `{"a": {"x": 1}}`, `{"a": "s"}`, `{"a": "s"}`},
		{"delete missing key", `{"a": 1}`, `{"z": null}`, `{"a": 1}`},
		{"empty target", ``, `{"a": [1]}`, `{"a": [1]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MergeJSON([]byte(tt.target), []byte(tt.patch))
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			_ = json.Unmarshal(got, &g)
			_ = json.Unmarshal([]byte(tt.want), &w)
			if diff := cmp.Diff(w, g); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestMergeJSONRejectsNonObjects(t *testing.T) {
	if _, err := MergeJSON([]byte(`[1]`), []byte(`{}`)); err == nil {
		t.Error("array state accepted")
	}
	if _, err := MergeJSON([]byte(`{}`), []byte(`3`)); err == nil {
		t.Error("number patch accepted")
	}
}

func FuzzMergeJSON(f *testing.F) {
	f.Add([]byte(`{"a":{"b":1}}`), []byte(`{"a":{"b":null,"c":[1]}}`))
	f.Fuzz(func(t *testing.T, doc, patch []byte) {
		out, err := MergeJSON(doc, patch)
		if err != nil {
			return
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("merge produced invalid JSON %s: %v", out, err)
		}
	})
}
