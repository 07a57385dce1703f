package text

import (
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"too long", 3, "too…"},
		{"héllo", 2, "h…"}, // é is two bytes: no half rune
		{"héllo", 3, "hé…"},
		{"", 0, ""},
		{"x", 0, "…"},
	}
	for _, tt := range tests {
		if got := Clip(tt.s, tt.n); got != tt.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

func FuzzClip(f *testing.F) {
	f.Add("héllo wörld", 4)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > len(s)+8 {
			return
		}
		got := Clip(s, n)
		if len(s) <= n && got != s {
			t.Fatalf("Clip(%q, %d) = %q, changed a string that fits", s, n, got)
		}
		if len(got) > n+len("…") {
			t.Fatalf("Clip(%q, %d) = %q, longer than %d bytes and the mark", s, n, got, n)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Clip(%q, %d) = %q cut a rune", s, n, got)
		}
	})
}
