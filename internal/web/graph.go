package web

import (
	"bytes"
	"container/list"
	"fmt"
	"html"
	"math"
	"strconv"
	"sync"

	"github.com/planbus/planbus/internal/web/layout"
)

// DefaultGraphLimit is the most tools a plan may have for its DAG to be
// drawn; a larger plan is shown as a table. The layout of 300 tools takes
// tens of milliseconds, but a larger drawing no longer reads on a screen.
const DefaultGraphLimit = 300

// nodeID and edgeID are the ids of a tool's node and of a dependency's
// edge in the drawn SVG, which the page's script finds them by. A tool id
// has no '/' (letters, digits, '_', '.', ':', '-'), so neither is
// ambiguous.
func nodeID(tool string) string     { return "t/" + tool }
func edgeID(from, to string) string { return "e/" + from + "/" + to }

// The drawing's measures, in points, as Graphviz drew the view's DAGs
// before (Helvetica 11, margins of 0.12 by 0.06 inches, boxes at least
// 0.75 by 0.5 inches, arrowheads at 0.7 of their size).
const (
	fontSize   = 11.0
	lineHeight = 13.2
	marginX    = 8.64
	minBoxW    = 54
	minBoxH    = 36
	corner     = 6
	arrowLen   = 7
	arrowHalf  = 2.5
	pad        = 7.2
)

// textWidth estimates the width of s in Helvetica at fontSize: the font's
// advance widths for the characters tool ids and skills may hold, a tenth
// more for the sans-serif fonts a browser may put in its place.
func textWidth(s string) float64 {
	w := 0
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9', r == '_':
			w += 556
		case r == '.' || r == ':':
			w += 278
		case r == '-':
			w += 333
		case r >= 'A' && r <= 'Z':
			w += int(helveticaUpper[r-'A'])
		case r >= 'a' && r <= 'z':
			w += int(helveticaLower[r-'a'])
		default:
			w += 556
		}
	}
	return float64(w) * fontSize / 1000 * 1.1
}

var (
	helveticaUpper = [26]uint16{667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778, 667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611}
	helveticaLower = [26]uint16{556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556, 556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500}
)

// num writes a coordinate with at most two decimals.
func num(x float64) string {
	return strconv.FormatFloat(math.Round(x*100)/100, 'f', -1, 64)
}

// drawSVG draws a plan's DAG left to right as an <svg> element: a group
// per tool (id nodeID, class "node tool": a rounded box as a <path>, its
// id and skill as two <text> lines) and a group per dependency (id edgeID,
// class "edge dep": a <path> and an arrowhead <polygon>), edges first so
// that boxes lie over them. States are not in it: the page colours the
// nodes from the tool table, so one drawing serves every moment of the
// run. Its units are points; width and height say so, which the page's
// script reads to size it.
func drawSVG(m *planModel) []byte {
	g := m.graph
	sizes := make([]layout.Size, g.Len())
	for i, t := range m.Tools {
		sizes[i] = layout.Size{W: max(minBoxW, math.Ceil(max(textWidth(t.ID), textWidth(t.Skill))+2*marginX)), H: minBoxH}
	}
	lay := layout.Layered(g, func(i int) layout.Size { return sizes[i] }, layout.Options{NodeSep: 18, RankSep: 32.4})
	w, h := lay.Width+2*pad, lay.Height+2*pad
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg width="%spt" height="%spt" viewBox="0 0 %s %s" xmlns="http://www.w3.org/2000/svg">`+"\n", num(w), num(h), num(w), num(h))
	fmt.Fprintf(&b, `<g id="graph0" class="graph" transform="translate(%s %s)">`+"\n<title>plan</title>\n", num(pad), num(pad))
	for i, t := range m.Tools {
		for k, d := range g.Deps(i) {
			from := m.Tools[d].ID
			r := lay.Routes[i][k]
			tip := r[len(r)-1]
			r[len(r)-1].X -= arrowLen // the line ends where the arrowhead starts
			fmt.Fprintf(&b, `<g id="%s" class="edge dep">`+"\n<title>%s&#45;&gt;%s</title>\n", html.EscapeString(edgeID(from, t.ID)), html.EscapeString(from), html.EscapeString(t.ID))
			b.WriteString(`<path fill="none" stroke="#9ca3af" d="M` + num(r[0].X) + "," + num(r[0].Y))
			for j := 1; j < len(r); j++ {
				p, q := r[j-1], r[j]
				if p.Y == q.Y {
					b.WriteString(" L" + num(q.X) + "," + num(q.Y))
					continue
				}
				mid := (p.X + q.X) / 2
				b.WriteString(" C" + num(mid) + "," + num(p.Y) + " " + num(mid) + "," + num(q.Y) + " " + num(q.X) + "," + num(q.Y))
			}
			b.WriteString("\"/>\n")
			fmt.Fprintf(&b, `<polygon fill="#9ca3af" stroke="#9ca3af" points="%s,%s %s,%s %s,%s %s,%s"/>`+"\n</g>\n",
				num(tip.X-arrowLen), num(tip.Y-arrowHalf), num(tip.X), num(tip.Y), num(tip.X-arrowLen), num(tip.Y+arrowHalf), num(tip.X-arrowLen), num(tip.Y-arrowHalf))
		}
	}
	for i, t := range m.Tools {
		c, s := lay.Center[i], sizes[i]
		x0, y0, x1, y1 := c.X-s.W/2, c.Y-s.H/2, c.X+s.W/2, c.Y+s.H/2
		fmt.Fprintf(&b, `<g id="%s" class="node tool">`+"\n<title>%s</title>\n", html.EscapeString(nodeID(t.ID)), html.EscapeString(t.ID))
		arc := " A" + num(corner) + "," + num(corner) + " 0 0 1 "
		fmt.Fprintf(&b, `<path fill="#eef0f3" stroke="#6b7280" d="M%s,%s H%s%s%s,%s V%s%s%s,%s H%s%s%s,%s V%s%s%s,%s Z"/>`+"\n",
			num(x0+corner), num(y0), num(x1-corner), arc, num(x1), num(y0+corner),
			num(y1-corner), arc, num(x1-corner), num(y1),
			num(x0+corner), arc, num(x0), num(y1-corner),
			num(y0+corner), arc, num(x0+corner), num(y0))
		for j, line := range []string{t.ID, t.Skill} {
			fmt.Fprintf(&b, `<text text-anchor="middle" x="%s" y="%s" font-family="Helvetica,sans-Serif" font-size="%s">%s</text>`+"\n",
				num(c.X), num(c.Y-3.3+float64(j)*lineHeight), num(fontSize), html.EscapeString(line))
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</g>\n</svg>\n")
	return b.Bytes()
}

// renderer draws DAGs and keeps the last drawings: a plan never changes,
// so its drawing is made once. It is safe for concurrent use.
type renderer struct {
	mu    sync.Mutex
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

// svg returns the drawing of the plan's DAG as an <svg> element. It fails
// for a plan whose tools are not a DAG, or whose ids or skills are not as
// the plan schema has them (the drawing goes into the page as it is).
func (r *renderer) svg(m *planModel) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.cache[m.PlanID]; ok {
		r.order.MoveToFront(e)
		return e.Value.(*drawing).svg, nil
	}
	for _, t := range m.Tools {
		if !toolIDPattern.MatchString(t.ID) || !skillPattern.MatchString(t.Skill) {
			return nil, fmt.Errorf("web: plan %s: tool %q (skill %q): not an id and a skill name as the plan schema has them", m.PlanID, t.ID, t.Skill)
		}
	}
	if m.graph == nil {
		return nil, fmt.Errorf("web: plan %s: its tools' dependencies are not a DAG", m.PlanID)
	}
	svg := drawSVG(m)
	r.cache[m.PlanID] = r.order.PushFront(&drawing{planID: m.PlanID, svg: svg})
	for r.order.Len() > r.size {
		last := r.order.Back()
		r.order.Remove(last)
		delete(r.cache, last.Value.(*drawing).planID)
	}
	return svg, nil
}
