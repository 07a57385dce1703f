package goap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// An action's input is any JSON object. In its string values (at any
// depth; object keys are left alone) "{fact}" stands for the fact's value
// in the state the action starts from:
//
//	"{target}"          the value itself, with its JSON type (null if absent)
//	"tree {target}"     the value as text: numbers in shortest form, bools
//	                    as true/false, an absent fact as ""
//	"{{literal}}"       braces are doubled to be taken literally
//
// Decode checks every template names a declared fact.

// part is a piece of a template string: literal text, or a fact.
type part struct {
	text string
	fact int // -1 for text
}

// parseTemplate splits s into literal text and fact references.
func (d *Domain) parseTemplate(s string) ([]part, error) {
	var parts []part
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, part{text: lit.String(), fact: -1})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '{' && i+1 < len(s) && s[i+1] == '{', c == '}' && i+1 < len(s) && s[i+1] == '}':
			lit.WriteByte(c)
			i++
		case c == '{':
			end := strings.IndexByte(s[i+1:], '}')
			if end < 0 {
				return nil, fmt.Errorf("unclosed { in %q (write {{ for a literal brace)", s)
			}
			name := strings.TrimSpace(s[i+1 : i+1+end])
			fi, ok := d.facts[name]
			if !ok {
				return nil, fmt.Errorf("{%s} in %q names no declared fact (write {{ for a literal brace)", name, s)
			}
			if fi >= len(d.Facts) {
				return nil, fmt.Errorf("{%s} in %q names a derived fact; templates take the facts it is derived from", name, s)
			}
			flush()
			parts = append(parts, part{fact: fi})
			i += end + 1
		case c == '}':
			return nil, fmt.Errorf("unmatched } in %q (write }} for a literal brace)", s)
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return parts, nil
}

// checkInput decodes an action's input and checks its templates.
func (d *Domain) checkInput(raw json.RawMessage, path, owner string) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var in any
	if err := dec.Decode(&in); err != nil {
		return nil, &DomainError{Path: path, Msg: fmt.Sprintf("%s: input: %v", owner, err), Err: err}
	}
	var walk func(x any, at string) error
	walk = func(x any, at string) error {
		switch v := x.(type) {
		case string:
			if _, err := d.parseTemplate(v); err != nil {
				return &DomainError{Path: at, Msg: fmt.Sprintf("%s: input: %v", owner, err), Err: err}
			}
		case []any:
			for i, e := range v {
				if err := walk(e, fmt.Sprintf("%s/%d", at, i)); err != nil {
					return err
				}
			}
		case map[string]any:
			if _, ok := v["$ref"]; ok && len(v) == 1 {
				return &DomainError{Path: at, Msg: fmt.Sprintf("%s: input: {\"$ref\": ...} would reference another tool's output, which GOAP actions cannot do; use a fact template instead", owner)}
			}
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if err := walk(v[k], at+"/"+pointerToken(k)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(in, path); err != nil {
		return nil, err
	}
	return in, nil
}

// hasTemplates reports whether a decoded input holds a {fact} template
// (or a doubled brace, which rendering turns into one).
func hasTemplates(x any) bool {
	switch v := x.(type) {
	case string:
		return strings.ContainsAny(v, "{}")
	case []any:
		return slices.ContainsFunc(v, hasTemplates)
	case map[string]any:
		for _, e := range v {
			if hasTemplates(e) {
				return true
			}
		}
	}
	return false
}

func pointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// render expands the templates of an action's input in state s and
// returns it as JSON.
func (a *Action) render(d *Domain, s []value) json.RawMessage {
	if a.static != nil {
		return slices.Clone(a.static) // the caller owns its input
	}
	var expand func(x any) any
	expand = func(x any) any {
		switch v := x.(type) {
		case string:
			parts, _ := d.parseTemplate(v) // checked by Decode
			if len(parts) == 1 && parts[0].fact >= 0 {
				return s[parts[0].fact].any()
			}
			var b strings.Builder
			for _, p := range parts {
				if p.fact < 0 {
					b.WriteString(p.text)
				} else {
					b.WriteString(s[p.fact].text())
				}
			}
			return b.String()
		case []any:
			out := make([]any, len(v))
			for i, e := range v {
				out[i] = expand(e)
			}
			return out
		case map[string]any:
			out := make(map[string]any, len(v))
			for k, e := range v {
				out[k] = expand(e)
			}
			return out
		}
		return x
	}
	out, _ := json.Marshal(expand(a.input)) // maps, slices and scalars only
	return out
}
