package goap

import (
	"regexp"
	"strings"
	"testing"
)

// isFactName says what the regexp it replaced said.
func TestIsFactNameIsTheRegexp(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	cases := []string{"", "a", "_", "9", "a9", "_9_", "A_b", "a-b", "a b", "é", "aé", "a\n", "\na", "a\x00",
		strings.Repeat("a", 127), strings.Repeat("a", 128), strings.Repeat("a", 129), "_" + strings.Repeat("9", 127), "9" + strings.Repeat("a", 10)}
	for c := 0; c < 256; c++ {
		cases = append(cases, string(rune(c)), "a"+string([]byte{byte(c)}), string([]byte{byte(c)})+"a")
	}
	for _, s := range cases {
		if got, want := isFactName(s), re.MatchString(s); got != want {
			t.Errorf("isFactName(%q) = %v, the regexp says %v", s, got, want)
		}
	}
}
