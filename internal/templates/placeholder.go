package templates

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A placeholder is {name}, name a letter or '_' then letters, digits or
// '_'. {{ and }} stand for literal braces; any other brace is literal too.

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// placeholderAt reports the name of a placeholder starting at s[i] == '{'.
func placeholderAt(s string, i int) (name string, ok bool) {
	j := i + 1
	if j >= len(s) || !isIdentStart(s[j]) {
		return "", false
	}
	for j < len(s) && isIdent(s[j]) {
		j++
	}
	if j >= len(s) || s[j] != '}' {
		return "", false
	}
	return s[i+1 : j], true
}

// walkText calls lit for literal text and ph for each placeholder, in order.
func walkText(s string, lit func(string), ph func(string)) {
	start := 0
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case (c == '{' || c == '}') && i+1 < len(s) && s[i+1] == c:
			lit(s[start : i+1])
			i += 2
			start = i
		case c == '{':
			if name, ok := placeholderAt(s, i); ok {
				lit(s[start:i])
				ph(name)
				i += len(name) + 2
				start = i
				continue
			}
			i++
		default:
			i++
		}
	}
	lit(s[start:])
}

// placeholders returns the names used in s, in order of appearance.
func placeholders(s string) []string {
	if !strings.ContainsAny(s, "{}") {
		return nil
	}
	var names []string
	walkText(s, func(string) {}, func(n string) { names = append(names, n) })
	return names
}

// expand replaces each placeholder of s by its value and unescapes braces.
// Every placeholder must have a value: Decode and Instantiate see to it.
func expand(s string, vars map[string]string) string {
	if !strings.ContainsAny(s, "{}") {
		return s
	}
	var b strings.Builder
	walkText(s, func(t string) { b.WriteString(t) }, func(n string) { b.WriteString(vars[n]) })
	return b.String()
}

// decodeJSON reads one JSON value keeping numbers exact.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// jsonStrings calls f on every string of v, object keys included, with
// the JSON pointer of where it is.
func jsonStrings(v any, at string, f func(at, s string)) {
	switch x := v.(type) {
	case string:
		f(at, x)
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			p := at + "/" + escapeToken(k)
			f(p+" (key)", k)
			jsonStrings(x[k], p, f)
		}
	case []any:
		for i, e := range x {
			jsonStrings(e, at+"/"+itoa(i), f)
		}
	}
}

// expandJSON returns v with every string, keys included, expanded. Two
// keys of one object that expand to the same text are an error, not a
// silent (and map-order dependent) loss of one of them.
func expandJSON(v any, at string, vars map[string]string) (any, error) {
	switch x := v.(type) {
	case string:
		return expand(x, vars), nil
	case map[string]any:
		out := make(map[string]any, len(x))
		from := make(map[string]string, len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			ek := expand(k, vars)
			if prev, dup := from[ek]; dup {
				return nil, fmt.Errorf("at %s: keys %q and %q both become %q", at, prev, k, ek)
			}
			from[ek] = k
			e, err := expandJSON(x[k], at+"/"+escapeToken(ek), vars)
			if err != nil {
				return nil, err
			}
			out[ek] = e
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := expandJSON(e, at+"/"+itoa(i), vars)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func itoa(i int) string { return strconv.Itoa(i) }

func clip(s string) string { return clipN(s, 80) }

// clipN shortens s to at most max bytes and an ellipsis, on a rune boundary.
func clipN(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
