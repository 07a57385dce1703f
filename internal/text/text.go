// Package text holds the one helper for text that many of planbus's
// packages need the same way: cutting a message, a reason or an echoed
// input to a size a reply, an event or a log line may carry.
package text

import "unicode/utf8"

// Clip returns s cut to at most n bytes on a rune boundary, with "…"
// after the cut (so a clipped result may be up to len("…") bytes longer
// than n); s itself when it fits.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
