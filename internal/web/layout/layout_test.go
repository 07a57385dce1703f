package layout

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/planbus/planbus/internal/dag"
)

func graph(t testing.TB, deps map[string][]string, ids ...string) *dag.Graph {
	t.Helper()
	nodes := make([]dag.Node, len(ids))
	for i, id := range ids {
		nodes[i] = dag.Node{ID: id, Deps: deps[id]}
	}
	g, err := dag.New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func box(int) Size { return Size{W: 54, H: 36} }

// genGraph draws a DAG of up to 60 nodes, each depending on up to four
// earlier ones, near or far.
func genGraph(t *rapid.T) *dag.Graph {
	n := rapid.IntRange(1, 60).Draw(t, "n")
	nodes := make([]dag.Node, n)
	for i := range nodes {
		nodes[i].ID = fmt.Sprintf("n%d", i)
		if i == 0 {
			continue
		}
		for range rapid.IntRange(0, 4).Draw(t, "deg") {
			d := fmt.Sprintf("n%d", rapid.IntRange(0, i-1).Draw(t, "dep"))
			if !slices.Contains(nodes[i].Deps, d) {
				nodes[i].Deps = append(nodes[i].Deps, d)
			}
		}
	}
	g, err := dag.New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// check asserts what every layout must hold: each edge runs from a lower
// layer to a higher one, left to right, from its dependency's right side to
// its dependent's left side; no two boxes overlap or come closer than
// NodeSep in a layer; everything is inside Width and Height.
func check(t fataler, g *dag.Graph, size func(int) Size, l *Layout) {
	t.Helper()
	const eps = 1e-6
	n := g.Len()
	for i := range n {
		c, s := l.Center[i], size(i)
		if c.X-s.W/2 < -eps || c.Y-s.H/2 < -eps || c.X+s.W/2 > l.Width+eps || c.Y+s.H/2 > l.Height+eps {
			t.Fatalf("node %d's box at %+v size %+v is outside %gx%g", i, c, s, l.Width, l.Height)
		}
		for k, d := range g.Deps(i) {
			if l.Layer[d] >= l.Layer[i] {
				t.Fatalf("edge %d->%d: layers %d -> %d, want the dependency's lower", d, i, l.Layer[d], l.Layer[i])
			}
			r := l.Routes[i][k]
			if len(r) != 2*(l.Layer[i]-l.Layer[d]) {
				t.Fatalf("edge %d->%d across %d layers has %d points", d, i, l.Layer[i]-l.Layer[d], len(r))
			}
			cd, sd := l.Center[d], size(d)
			if math.Abs(r[0].X-(cd.X+sd.W/2)) > eps || math.Abs(r[0].Y-cd.Y) > sd.H/2 {
				t.Fatalf("edge %d->%d starts at %+v, not on the right side of %+v", d, i, r[0], cd)
			}
			end := r[len(r)-1]
			if math.Abs(end.X-(c.X-s.W/2)) > eps || math.Abs(end.Y-c.Y) > s.H/2 {
				t.Fatalf("edge %d->%d ends at %+v, not on the left side of %+v", d, i, end, c)
			}
			for j := 1; j < len(r); j++ {
				if r[j].X < r[j-1].X-eps {
					t.Fatalf("edge %d->%d turns back: %v", d, i, r)
				}
			}
		}
		for j := range i {
			a, b, sa, sb := l.Center[i], l.Center[j], size(i), size(j)
			if math.Abs(a.X-b.X) < (sa.W+sb.W)/2 && math.Abs(a.Y-b.Y) < (sa.H+sb.H)/2+18-eps {
				t.Fatalf("nodes %d and %d overlap or are closer than NodeSep: %+v %+v", i, j, a, b)
			}
		}
	}
}

// fataler is what check needs of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func TestLayeredProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := genGraph(t)
		wide := rapid.IntRange(20, 200).Draw(t, "width")
		size := func(i int) Size { return Size{W: float64(20 + (i*37)%wide), H: float64(24 + (i*11)%30)} }
		l := Layered(g, size, Options{})
		check(t, g, size, l)
		if again := Layered(g, size, Options{}); fmt.Sprint(again) != fmt.Sprint(l) {
			t.Fatalf("two layouts of one graph differ")
		}
	})
}

func TestLayered(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ids       []string
		deps      map[string][]string
		layers    []int
		crossings int
		sameY     [][2]int // pairs of nodes on one line
	}{
		{name: "one", ids: []string{"a"}, layers: []int{0}},
		{name: "chain", ids: []string{"a", "b", "c"}, deps: map[string][]string{"b": {"a"}, "c": {"b"}},
			layers: []int{0, 1, 2}, sameY: [][2]int{{0, 1}, {1, 2}}},
		{name: "diamond", ids: []string{"A", "B", "C", "D"}, deps: map[string][]string{"B": {"A"}, "C": {"A"}, "D": {"B", "C"}},
			layers: []int{0, 1, 1, 2}, sameY: [][2]int{{0, 3}}},
		// A source that feeds only a late tool sits just before it.
		{name: "late source", ids: []string{"a", "b", "c", "s"}, deps: map[string][]string{"b": {"a"}, "c": {"b", "s"}},
			layers: []int{0, 1, 2, 1}},
		// Declared crosswise: a->d and b->c, with c above d at first.
		{name: "untangled", ids: []string{"a", "b", "c", "d"}, deps: map[string][]string{"c": {"b"}, "d": {"a"}},
			layers: []int{0, 0, 1, 1}, sameY: [][2]int{{0, 3}, {1, 2}}},
		// K(3,3) in two layers crosses 9 times, whatever the order.
		{name: "K33", ids: []string{"a", "b", "c", "x", "y", "z"},
			deps:   map[string][]string{"x": {"a", "b", "c"}, "y": {"a", "b", "c"}, "z": {"a", "b", "c"}},
			layers: []int{0, 0, 0, 1, 1, 1}, crossings: 9},
		// A long edge runs straight past a chain.
		{name: "shortcut", ids: []string{"a", "b", "c", "d"}, deps: map[string][]string{"b": {"a"}, "c": {"b"}, "d": {"c", "a"}},
			layers: []int{0, 1, 2, 3}, crossings: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := graph(t, tc.deps, tc.ids...)
			l := Layered(g, box, Options{})
			check(t, g, box, l)
			if !slices.Equal(l.Layer, tc.layers) {
				t.Errorf("layers %v, want %v", l.Layer, tc.layers)
			}
			if l.Crossings != tc.crossings {
				t.Errorf("%d crossings, want %d", l.Crossings, tc.crossings)
			}
			for _, p := range tc.sameY {
				if math.Abs(l.Center[p[0]].Y-l.Center[p[1]].Y) > 0.01 {
					t.Errorf("%s at y %g and %s at %g, want one line", tc.ids[p[0]], l.Center[p[0]].Y, tc.ids[p[1]], l.Center[p[1]].Y)
				}
			}
		})
	}
}

// crossingsNaive counts the crossing pairs of links pair by pair.
func crossingsNaive(b *builder) int {
	type link struct{ u, v int }
	total := 0
	for l := 0; l+1 < len(b.layers); l++ {
		var ls []link
		for _, u := range b.layers[l] {
			for _, v := range b.items[u].down {
				ls = append(ls, link{b.pos[u], b.pos[v]})
			}
		}
		for i := range ls {
			for j := range i {
				if (ls[i].u-ls[j].u)*(ls[i].v-ls[j].v) < 0 {
					total++
				}
			}
		}
	}
	return total
}

// The Fenwick-tree count of crossings against the pair-by-pair one, on the
// first order and after the sweeps; the sweeps never end worse than they
// began.
func TestCrossings(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := genGraph(t)
		b := &builder{o: Options{NodeSep: 18, RankSep: 32}}
		layer := layers(g)
		for i := range g.Len() {
			b.items = append(b.items, item{node: i, layer: layer[i], h: 36})
		}
		b.split(g, layer)
		if got, want := b.crossings(), crossingsNaive(b); got != want {
			t.Fatalf("first order: %d crossings, counted one by one %d", got, want)
		}
		for l := 1; l < len(b.layers); l++ {
			b.reorder(l, true)
		}
		first := b.crossings()
		b.order()
		if got, want := b.crossings(), crossingsNaive(b); got != want {
			t.Fatalf("after the sweeps: %d crossings, counted one by one %d", got, want)
		}
		if b.crossings() > first {
			t.Fatalf("the sweeps went from %d crossings to %d", first, b.crossings())
		}
	})
}

// isotonic against the constraints and against any feasible nudge.
func TestIsotonic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 12).Draw(t, "n")
		tg, w, gap := make([]float64, n), make([]float64, n), make([]float64, max(n-1, 0))
		for j := range n {
			tg[j] = float64(rapid.IntRange(-100, 100).Draw(t, "t"))
			w[j] = float64(rapid.IntRange(1, 5).Draw(t, "w"))
			if j > 0 {
				gap[j-1] = float64(rapid.IntRange(0, 40).Draw(t, "gap"))
			}
		}
		y := isotonic(tg, w, gap)
		cost := func(y []float64) float64 {
			c := 0.0
			for j := range y {
				c += w[j] * (y[j] - tg[j]) * (y[j] - tg[j])
			}
			return c
		}
		for j := 1; j < n; j++ {
			if y[j]-y[j-1] < gap[j-1]-1e-9 {
				t.Fatalf("y %v breaks gap %d (%g)", y, j-1, gap[j-1])
			}
		}
		// Moving any run of consecutive points together, where that keeps
		// the gaps, costs no less.
		for a := range n {
			for z := a; z < n; z++ {
				for _, d := range []float64{-0.5, 0.5} {
					m := slices.Clone(y)
					for j := a; j <= z; j++ {
						m[j] += d
					}
					ok := true
					for j := 1; j < n; j++ {
						ok = ok && m[j]-m[j-1] >= gap[j-1]-1e-9
					}
					if ok && cost(m) < cost(y)-1e-6 {
						t.Fatalf("y %v costs %g; moving %d..%d by %g costs %g", y, cost(y), a, z, d, cost(m))
					}
				}
			}
		}
	})
}

// A plan of 300 tools, each depending on up to three of the twenty before.
func BenchmarkLayered300(b *testing.B) {
	nodes := make([]dag.Node, 300)
	for i := range nodes {
		nodes[i].ID = fmt.Sprintf("t%d", i)
		for k := 1; k <= 3 && i > 0; k++ {
			d := fmt.Sprintf("t%d", max(0, i-1-(i*7*k)%20))
			if !slices.Contains(nodes[i].Deps, d) {
				nodes[i].Deps = append(nodes[i].Deps, d)
			}
		}
	}
	g, err := dag.New(nodes)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		Layered(g, box, Options{})
	}
}
