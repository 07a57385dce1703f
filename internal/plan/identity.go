package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
)

// Identities returns, for each tool of a plan that passed Check (nil
// otherwise), a digest of what the tool does given what it depends on:
// its skill and input, its fallback's skill and input, and the
// identities of its dependencies, with every $ref in an input rewritten
// to the identity of the tool it names. Tool ids do not count, nor do
// timeouts, retry policies, gates, approvals, descriptions and metadata:
// they change how a tool is run, not what it does.
//
// Two tools with the same identity, in two plans of one request, run the
// same skill on the same input once their references are resolved,
// provided the tools they depend on gave them the same outputs; that is
// what makes a succeeded tool's output reusable in a replan (see
// ReuseRef). Tools of one plan that would share an identity are told
// apart by their rank among them in the plan's Kahn order, so that each
// takes the output of its own counterpart.
func (p *Plan) Identities() []string {
	g := p.graph
	if g == nil {
		return nil
	}
	ids := make([]string, len(p.Tools))
	rank := map[string]int{}
	for _, i := range g.Order() {
		t := &p.Tools[i]
		of := func(toolID string) string {
			j, ok := g.Index(toolID)
			if !ok {
				return toolID // Check lets no such reference through
			}
			return ids[j]
		}
		deps := make([]string, 0, len(g.Deps(i)))
		for _, d := range g.Deps(i) {
			deps = append(deps, ids[d])
		}
		slices.Sort(deps)
		doc := []any{t.Skill, canonicalInput(t.Input, of), deps}
		if f := t.Fallback; f != nil {
			doc = append(doc, f.Skill, canonicalInput(f.Input, of))
		}
		b, err := json.Marshal(doc)
		if err != nil {
			b = append([]byte(t.Skill), t.Input...) // not reached: doc holds decoded JSON
		}
		sum := sha256.Sum256(b)
		id := hex.EncodeToString(sum[:16])
		n := rank[id]
		rank[id] = n + 1
		if n > 0 {
			id += "." + strconv.Itoa(n)
		}
		ids[i] = id
	}
	return ids
}

// canonicalInput is an input decoded (numbers as written), with each
// reference's tool replaced by of(tool); encoding it again sorts its keys.
func canonicalInput(input json.RawMessage, of func(string) string) any {
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return string(input)
	}
	var walk func(v any) any
	walk = func(v any) any {
		if s, ok := asRef(v); ok {
			tool, ptr, err := parseRef(s)
			if err != nil {
				return v
			}
			if ptr != "" {
				ptr = "#" + ptr
			}
			return map[string]any{"$ref": of(tool) + ptr}
		}
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	return walk(v)
}
