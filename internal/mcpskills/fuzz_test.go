package mcpskills

import (
	"strings"
	"testing"

	"github.com/planbus/planbus/internal/wire"
)

// FuzzParseSpec: --mcp's parser never panics, and what it accepts has a
// valid namespace and one of a command or a URL.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"demo=./mcp-server -v", "gh=https://example.com/mcp", "a.b=x", "=", "x=http://", "n= \t "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := ParseSpec(s)
		if err != nil {
			return
		}
		if !wire.IsName(spec.Name) {
			t.Errorf("ParseSpec(%q) accepted the name %q", s, spec.Name)
		}
		if (spec.URL == "") == (len(spec.Command) == 0) {
			t.Errorf("ParseSpec(%q) = %+v: want a command or a URL", s, spec)
		}
		for _, a := range spec.Command {
			if a == "" || strings.ContainsAny(a, " \t\n") {
				t.Errorf("ParseSpec(%q): command word %q", s, a)
			}
		}
	})
}
