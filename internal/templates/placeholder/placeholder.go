// Package placeholder is the text language of plan templates' {var}
// placeholders: finding them in a string or in every string of a JSON
// document, and filling them in.
//
// A placeholder is {name}, name a letter or '_' then letters, digits or
// '_'. {{ and }} stand for literal braces; any other brace is literal too,
// so shell text such as awk '{ print $1 }' needs no escaping.
package placeholder

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// IsIdent reports whether c may be in a placeholder's name (a letter, a
// digit or '_').
func IsIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// at reports the name of a placeholder starting at s[i] == '{'.
func at(s string, i int) (name string, ok bool) {
	j := i + 1
	if j >= len(s) || !isIdentStart(s[j]) {
		return "", false
	}
	for j < len(s) && IsIdent(s[j]) {
		j++
	}
	if j >= len(s) || s[j] != '}' {
		return "", false
	}
	return s[i+1 : j], true
}

// walk calls lit for literal text and ph for each placeholder, in order.
func walk(s string, lit func(string), ph func(string)) {
	start := 0
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case (c == '{' || c == '}') && i+1 < len(s) && s[i+1] == c:
			lit(s[start : i+1])
			i += 2
			start = i
		case c == '{':
			if name, ok := at(s, i); ok {
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

// Names returns the names of the placeholders of s, in order of
// appearance (a name used twice is there twice).
func Names(s string) []string {
	if !strings.ContainsAny(s, "{}") {
		return nil
	}
	var names []string
	walk(s, func(string) {}, func(n string) { names = append(names, n) })
	return names
}

// Expand replaces each placeholder of s by its value in vars and
// unescapes braces. Values are not expanded again; a placeholder without
// a value becomes empty (callers check names first, with Names).
func Expand(s string, vars map[string]string) string {
	if !strings.ContainsAny(s, "{}") {
		return s
	}
	var b strings.Builder
	walk(s, func(t string) { b.WriteString(t) }, func(n string) { b.WriteString(vars[n]) })
	return b.String()
}

// Strings calls f on every string of v (a JSON document decoded into
// any), object keys included, with the JSON pointer of where it is (a
// key's pointer is followed by " (key)"). Object keys are visited in
// sorted order.
func Strings(v any, f func(at, s string)) { stringsAt(v, "", f) }

func stringsAt(v any, at string, f func(at, s string)) {
	switch x := v.(type) {
	case string:
		f(at, x)
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			p := at + "/" + escapeToken(k)
			f(p+" (key)", k)
			stringsAt(x[k], p, f)
		}
	case []any:
		for i, e := range x {
			stringsAt(e, at+"/"+strconv.Itoa(i), f)
		}
	}
}

// ExpandJSON returns v (a JSON document decoded into any) with every
// string, keys included, expanded. Two keys of one object that expand to
// the same text are an error naming where, not a silent (and map-order
// dependent) loss of one of them.
func ExpandJSON(v any, vars map[string]string) (any, error) { return expandAt(v, "", vars) }

func expandAt(v any, at string, vars map[string]string) (any, error) {
	switch x := v.(type) {
	case string:
		return Expand(x, vars), nil
	case map[string]any:
		out := make(map[string]any, len(x))
		from := make(map[string]string, len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			ek := Expand(k, vars)
			if prev, dup := from[ek]; dup {
				return nil, fmt.Errorf("at %s: keys %q and %q both become %q", at, prev, k, ek)
			}
			from[ek] = k
			e, err := expandAt(x[k], at+"/"+escapeToken(ek), vars)
			if err != nil {
				return nil, err
			}
			out[ek] = e
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := expandAt(e, at+"/"+strconv.Itoa(i), vars)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

// escapeToken escapes a JSON pointer's reference token (RFC 6901).
func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
