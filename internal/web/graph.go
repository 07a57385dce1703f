package web

import (
	"bytes"
	"container/list"
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/goccy/go-graphviz"
)

// DefaultGraphLimit is the most tools a plan may have for its DAG to be
// drawn; a larger plan is shown as a table. Graphviz's dot layout of 300
// tools takes about a tenth of a second, of 1,000 close to a second.
const DefaultGraphLimit = 300

// nodeID and edgeID are the ids of a tool's node and of a dependency's
// edge in the drawn SVG, which the page's script finds them by. A tool id
// has no '/' (letters, digits, '_', '.', ':', '-'), so neither is
// ambiguous.
func nodeID(tool string) string     { return "t/" + tool }
func edgeID(from, to string) string { return "e/" + from + "/" + to }

// dotQuote makes s a DOT quoted string.
func dotQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// dot is the DOT source of a plan's DAG: left to right, one box per tool
// (its id and skill), an edge from each dependency to its dependent. The
// layout is the dot engine's (layered: Sugiyama-style ranks, crossing
// reduction, coordinate assignment); states are not in it: the page
// colours the nodes from the tool table, so one drawing serves every
// moment of the run.
func dot(m *planModel) []byte {
	var b bytes.Buffer
	b.WriteString("digraph plan {\n")
	b.WriteString("  graph [rankdir=LR, bgcolor=\"transparent\", nodesep=0.25, ranksep=0.45, pad=0.1];\n")
	b.WriteString("  node [shape=box, style=\"rounded,filled\", fillcolor=\"#eef0f3\", color=\"#6b7280\", fontname=\"Helvetica\", fontsize=11, margin=\"0.12,0.06\"];\n")
	b.WriteString("  edge [color=\"#9ca3af\", arrowsize=0.7];\n")
	for _, t := range m.Tools {
		label := t.ID + "\n" + t.Skill
		fmt.Fprintf(&b, "  %s [id=%s, class=\"tool\", label=%s];\n", dotQuote(t.ID), dotQuote(nodeID(t.ID)), dotQuote(label))
	}
	for _, t := range m.Tools {
		for _, d := range t.Deps {
			fmt.Fprintf(&b, "  %s -> %s [id=%s, class=\"dep\"];\n", dotQuote(d), dotQuote(t.ID), dotQuote(edgeID(d, t.ID)))
		}
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// renderer draws DAGs with Graphviz (compiled to WebAssembly, run by
// wazero in this process) and keeps the last drawings: a plan never
// changes, so its drawing is made once. Graphviz is not safe for
// concurrent use; one drawing is made at a time.
type renderer struct {
	mu    sync.Mutex
	gv    *graphviz.Graphviz
	cache map[string]*list.Element
	order *list.List // of *drawing, most recent first
	size  int
}

type drawing struct {
	planID string
	svg    []byte
}

func newRenderer(size int) *renderer {
	return &renderer{cache: map[string]*list.Element{}, order: list.New(), size: size}
}

// svgStart finds where the <svg> element starts: what comes before it
// (the XML declaration, the doctype, comments) is left out when the
// drawing is put inside a page.
var svgStart = regexp.MustCompile(`<svg[\s>]`)

// svg returns the drawing of the plan's DAG as an <svg> element.
func (r *renderer) svg(ctx context.Context, m *planModel) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.cache[m.PlanID]; ok {
		r.order.MoveToFront(e)
		return e.Value.(*drawing).svg, nil
	}
	if r.gv == nil {
		gv, err := graphviz.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("web: graphviz: %w", err)
		}
		r.gv = gv
	}
	for _, t := range m.Tools {
		// The drawing goes into the page as it is: only what the schemas
		// allow in ids and skill names may be in it.
		if !toolIDPattern.MatchString(t.ID) || !skillPattern.MatchString(t.Skill) {
			return nil, fmt.Errorf("web: plan %s: tool %q (skill %q): not an id and a skill name as the plan schema has them", m.PlanID, t.ID, t.Skill)
		}
	}
	g, err := graphviz.ParseBytes(dot(m))
	if err != nil {
		return nil, fmt.Errorf("web: plan %s: graphviz: %w", m.PlanID, err)
	}
	defer g.Close()
	var out bytes.Buffer
	if err := r.gv.Render(ctx, g, graphviz.SVG, &out); err != nil {
		return nil, fmt.Errorf("web: plan %s: graphviz: %w", m.PlanID, err)
	}
	svg := out.Bytes()
	if loc := svgStart.FindIndex(svg); loc != nil {
		svg = svg[loc[0]:]
	}
	r.cache[m.PlanID] = r.order.PushFront(&drawing{planID: m.PlanID, svg: svg})
	for r.order.Len() > r.size {
		last := r.order.Back()
		r.order.Remove(last)
		delete(r.cache, last.Value.(*drawing).planID)
	}
	return svg, nil
}

// close frees Graphviz.
func (r *renderer) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gv != nil {
		_ = r.gv.Close()
		r.gv = nil
	}
}
