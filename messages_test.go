package planbus_test

import (
	"encoding/json"
	"io/fs"
	"strings"
	"testing"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/schemas"
)

// schemaAt reads the part of a schema file at a path of property names.
func schemaAt(t *testing.T, file string, path ...string) map[string]any {
	t.Helper()
	raw, err := fs.ReadFile(schemas.FS(), file)
	if err != nil {
		t.Fatal(err)
	}
	var node map[string]any
	if err := json.Unmarshal(raw, &node); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, p := range path {
		next, ok := node[p].(map[string]any)
		if !ok {
			t.Fatalf("%s: no object at %s", file, strings.Join(path, "/"))
		}
		node = next
	}
	return node
}

// The schemas tell a sender that names no session which one it gets: the
// same as DefaultSession, the one the planner and dispatchers fill in.
func TestDefaultSessionIsTheOneTheSchemasName(t *testing.T) {
	want := `default "` + planbus.DefaultSession + `"`
	for _, file := range []string{schemas.PlanRequest, schemas.Plan} {
		desc, _ := schemaAt(t, file, "properties", "sessionId")["description"].(string)
		if !strings.Contains(desc, want) {
			t.Errorf("%s: sessionId's description %q does not say %s", file, desc, want)
		}
	}
}
