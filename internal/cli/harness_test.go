package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/schemas"
)

// wait bounds a whole command run in these tests, so a hang fails with
// the command's stderr: a run that passes is done in seconds, and on a
// machine whose CPU is oversubscribed (make test-loaded) in a minute or
// more.
const wait = 5 * time.Minute

// newClient is a planbus client on conn.
func newClient(t *testing.T, conn *bus.Conn) *client.Client {
	t.Helper()
	c, err := client.New(conn.NC)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func lastResult(t *testing.T, stdout, stderr string) planbus.ExecutionResult {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	last := lines[len(lines)-1]
	if err := schemas.Validate(schemas.ExecutionResult, []byte(last)); err != nil {
		t.Fatalf("last stdout line is not an execution result (%v): %q\nstderr:\n%s", err, last, stderr)
	}
	var res planbus.ExecutionResult
	if err := json.Unmarshal([]byte(last), &res); err != nil {
		t.Fatal(err)
	}
	return res
}
