package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// ref is one {"$ref": "tool#/pointer"} in a tool's input.
type ref struct {
	at      string // where in the input, as a JSON pointer
	tool    string
	pointer string // "" for the whole output
}

func parseRef(s string) (tool, pointer string, err error) {
	tool, pointer, _ = strings.Cut(s, "#")
	if tool == "" {
		return "", "", fmt.Errorf("$ref %q names no tool", s)
	}
	if pointer != "" && !strings.HasPrefix(pointer, "/") {
		return "", "", fmt.Errorf("$ref %q: the pointer after '#' must start with '/'", s)
	}
	return tool, pointer, nil
}

// asRef reports whether v is a reference object.
func asRef(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return "", false
	}
	s, ok := m["$ref"].(string)
	return s, ok
}

func findRefs(input json.RawMessage) ([]ref, error) {
	if !bytes.Contains(input, []byte(`"$ref"`)) {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(input, &v); err != nil {
		return nil, err
	}
	var out []ref
	var walk func(v any, at string) error
	walk = func(v any, at string) error {
		if s, ok := asRef(v); ok {
			tool, ptr, err := parseRef(s)
			if err != nil {
				return fmt.Errorf("at %s: %w", at, err)
			}
			out = append(out, ref{at: at, tool: tool, pointer: ptr})
			return nil
		}
		switch x := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				if err := walk(x[k], at+"/"+escapeToken(k)); err != nil {
					return err
				}
			}
		case []any:
			for i, e := range x {
				if err := walk(e, at+"/"+strconv.Itoa(i)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(v, ""); err != nil {
		return nil, err
	}
	return out, nil
}

// Outputs gives a finished dependency's output; ok is false when the
// dependency produced none (it failed, being optional).
type Outputs func(toolID string) (output json.RawMessage, ok bool)

// ResolveInput returns tool i's input with every reference replaced by the
// dependency output it names, or null where there is none.
func (p *Plan) ResolveInput(i int, outputs Outputs) (json.RawMessage, error) {
	return p.resolveInput(i, p.Tools[i].Input, p.refsOf(i), outputs)
}

// ResolveInputFor is ResolveInput for attempt n of tool i: the fallback's
// input when the attempt is one of the fallback's.
func (p *Plan) ResolveInputFor(i, n int, outputs Outputs) (json.RawMessage, error) {
	v := p.Tools[i].Variant(n)
	if !v.Fallback {
		return p.ResolveInput(i, outputs)
	}
	var refs []ref
	if i < len(p.fallbacks) { // Check makes them for a plan with fallbacks
		refs = p.fallbacks[i]
	}
	return p.resolveInput(i, v.Input, refs, outputs)
}

func (p *Plan) resolveInput(i int, input json.RawMessage, refs []ref, outputs Outputs) (json.RawMessage, error) {
	if len(refs) == 0 {
		return input, nil
	}
	var v any
	if err := json.Unmarshal(input, &v); err != nil {
		return nil, err
	}
	resolved, err := resolve(v, outputs)
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", p.Tools[i].ToolID, err)
	}
	return json.Marshal(resolved)
}

func resolve(v any, outputs Outputs) (any, error) {
	return substitute(v, func(tool string) (json.RawMessage, bool) {
		out, _ := outputs(tool)
		return out, true // none: null
	})
}

// substitute replaces each reference in v whose tool output says to
// (replace) by the value it names in that output, null where the output
// is empty or names nothing.
func substitute(v any, output func(tool string) (out json.RawMessage, replace bool)) (any, error) {
	if s, ok := asRef(v); ok {
		tool, ptr, err := parseRef(s)
		if err != nil {
			return nil, err
		}
		out, replace := output(tool)
		switch {
		case !replace:
			return v, nil
		case len(out) == 0:
			return nil, nil
		}
		var o any
		if err := json.Unmarshal(out, &o); err != nil {
			return nil, fmt.Errorf("output of %q is not JSON: %w", tool, err)
		}
		return lookup(o, ptr), nil
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			r, err := substitute(e, output)
			if err != nil {
				return nil, err
			}
			x[k] = r
		}
	case []any:
		for i, e := range x {
			r, err := substitute(e, output)
			if err != nil {
				return nil, err
			}
			x[i] = r
		}
	}
	return v, nil
}

// lookup follows an RFC 6901 pointer; a pointer that names nothing gives nil.
func lookup(v any, pointer string) any {
	if pointer == "" {
		return v
	}
	for _, tok := range strings.Split(pointer[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			e, ok := x[tok]
			if !ok {
				return nil
			}
			v = e
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// InputHasRefs reports whether a tool's input holds a {"$ref": ...} that
// the dispatcher replaces with a dependency's output when it releases the
// call: such an input is known only then.
func InputHasRefs(input json.RawMessage) bool {
	refs, err := findRefs(input)
	return err != nil || len(refs) > 0
}

// InlineRefs returns input with every reference to a tool outputs has
// replaced by the value it names (null where it names nothing); the
// references to other tools stay as they are. A rerun of a plan's
// unfinished tools keeps the finished ones' outputs this way.
func InlineRefs(input json.RawMessage, outputs map[string]json.RawMessage) (json.RawMessage, error) {
	if len(input) == 0 || !InputHasRefs(input) {
		return input, nil
	}
	var v any
	if err := json.Unmarshal(input, &v); err != nil {
		return nil, err
	}
	v, err := substitute(v, func(tool string) (json.RawMessage, bool) {
		out, ok := outputs[tool]
		return out, ok
	})
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
