package cli

import (
	"net"
	"strings"
	"testing"

	"github.com/planbus/planbus/internal/bus"
)

// What protected mode lets through, without opening a port beyond loopback.
func TestExposureAllowed(t *testing.T) {
	for _, c := range []Common{
		{Bus: bus.Config{Listen: "127.0.0.1:4222"}},
		{Bus: bus.Config{Listen: "127.8.0.1:4222"}},
		{Bus: bus.Config{Listen: "localhost:4222"}},
		{Bus: bus.Config{Listen: "[::1]:4222"}},
		{},
		{Bus: bus.Config{Listen: "0.0.0.0:4222"}, Auth: true},
		{Bus: bus.Config{Listen: "0.0.0.0:4222"}, Insecure: true},
		{Bus: bus.Config{URL: "nats://10.0.0.1:4222", Listen: "0.0.0.0:4222"}},
	} {
		if err := c.CheckExposure("planner serve"); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// --listen is the user's: protected mode never panics on it, and lets
// through only loopback addresses (or says why not).
func FuzzCheckExposure(f *testing.F) {
	for _, s := range []string{"127.0.0.1:4222", "0.0.0.0:4222", "[::1]:1", "[::]:1", "localhost:0", "LOCALHOST:1", "host:1", ":4222", "nohost", "[fe80::1%eth0]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, listen string) {
		c := Common{Bus: bus.Config{Listen: listen}}
		err := c.CheckExposure("planner serve")
		host, _, splitErr := net.SplitHostPort(c.Bus.Defaults().Listen)
		if err == nil && splitErr == nil && !Loopback(host) {
			t.Fatalf("--listen %q let through", listen)
		}
		if err != nil && !strings.Contains(err.Error(), "--auth") {
			t.Fatalf("refusal %q does not name --auth", err)
		}
	})
}
