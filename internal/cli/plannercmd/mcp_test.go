package plannercmd

import (
	"strings"
	"testing"

	"github.com/planbus/planbus/internal/cli"
)

// planner mcp refuses to serve HTTP beyond the loopback interface without
// a bearer token, before it connects to anything.
func TestMCPRefusesAnOpenListenerWithoutAToken(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:8765", ":8765", "192.0.2.1:8765", "[::]:8765"} {
		o := runPlanner(t, "mcp", "--nats-url", "nats://127.0.0.1:1", "--listen", addr)
		if o.code != cli.ExitUsage || !strings.Contains(o.stderr, "give a bearer token") {
			t.Errorf("--listen %s without a token: exit %d, stderr %q; want 2 asking for a token", addr, o.code, o.stderr)
		}
	}
	o := runPlanner(t, "mcp", "--nats-url", "nats://127.0.0.1:1", "--listen", "127.0.0.1:0", "--token-file", t.TempDir()+"/missing")
	if o.code != cli.ExitUsage || !strings.Contains(o.stderr, "--token-file") {
		t.Errorf("a missing token file: exit %d, stderr %q; want 2 naming --token-file", o.code, o.stderr)
	}
	o = runPlanner(t, "mcp", "--nats-url", "nats://127.0.0.1:1", "extra")
	if o.code != cli.ExitUsage {
		t.Errorf("an argument: exit %d, want 2", o.code)
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:1": true, "localhost:80": true, "[::1]:9": true,
		"0.0.0.0:1": false, ":1": false, "10.0.0.1:1": false, "example.com:1": false, "nonsense": false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
