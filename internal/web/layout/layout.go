package layout

import (
	"math"
	"slices"

	"github.com/planbus/planbus/internal/dag"
)

// Size is a node's box.
type Size struct{ W, H float64 }

// Point is a position in the drawing: x grows to the right, y downwards.
type Point struct{ X, Y float64 }

// Options are the gaps of a drawing. A zero field takes its default.
type Options struct {
	// NodeSep is the least vertical gap between two boxes of a layer; an
	// edge passing through a layer keeps half of it from its neighbours.
	// Default 18 (Graphviz's nodesep of a quarter inch, in points).
	NodeSep float64
	// RankSep is the horizontal gap between two layers. Default 32.
	RankSep float64
}

// Layout is where a graph's nodes and edges go. The drawing spans 0..Width
// and 0..Height: the leftmost box touches x = 0, the topmost y = 0.
type Layout struct {
	Width, Height float64
	// Layer is each node's layer, 0 the leftmost: a node is in the layer
	// after its latest dependency's, and a node without dependencies in
	// the layer before its earliest dependent's.
	Layer []int
	// Center is the centre of each node's box.
	Center []Point
	// Routes[i][k] is the edge from g.Deps(i)[k] to i: from a point on the
	// dependency's right side to one on i's left side, x increasing, along
	// a track of its own through each layer in between. Consecutive points
	// are meant to be joined by a curve whose tangents are horizontal at
	// both ends (or a straight line where their y is the same).
	Routes [][][]Point
	// Crossings is how many pairs of edges cross between two layers.
	Crossings int
}

// maxSweeps bounds the barycenter sweeps; staleSweeps ends them early once
// that many in a row found no fewer crossings.
const (
	maxSweeps   = 24
	staleSweeps = 4
	placeRounds = 24
	// portStep is the most space between the ends of two edges on one
	// side of a box; they take at most portShare of its height.
	portStep  = 6
	portShare = 0.6
)

// item is a node of the layered graph: one of g's, or a dummy where an
// edge crosses a layer.
type item struct {
	node     int // index in g, -1 for a dummy
	layer    int
	h        float64
	up, down []int // items joined to this one in the layers before and after
}

type builder struct {
	o      Options
	items  []item
	layers [][]int // the items of each layer, in order from the top
	pos    []int   // each item's index in its layer
	y      []float64
	// chains[i][k] are the items of the edge g.Deps(i)[k] -> i, the
	// dependency first and i last.
	chains [][][]int
}

// Layered lays g out left to right. size gives each node's box. It returns
// a layout whose every edge runs from a lower layer to a higher one and
// whose boxes do not overlap.
func Layered(g *dag.Graph, size func(i int) Size, o Options) *Layout {
	if o.NodeSep <= 0 {
		o.NodeSep = 18
	}
	if o.RankSep <= 0 {
		o.RankSep = 32
	}
	n := g.Len()
	out := &Layout{Layer: layers(g), Center: make([]Point, n), Routes: make([][][]Point, n)}
	if n == 0 {
		return out
	}
	b := &builder{o: o}
	sizes := make([]Size, n)
	for i := range n {
		sizes[i] = size(i)
		b.items = append(b.items, item{node: i, layer: out.Layer[i], h: sizes[i].H})
	}
	b.split(g, out.Layer)
	b.order()
	out.Crossings = b.crossings()
	b.place()

	// Columns: each layer as wide as its widest box.
	nl := len(b.layers)
	colW, colX := make([]float64, nl), make([]float64, nl)
	for i := range n {
		colW[out.Layer[i]] = max(colW[out.Layer[i]], sizes[i].W)
	}
	for l := 1; l < nl; l++ {
		colX[l] = colX[l-1] + colW[l-1] + o.RankSep
	}
	out.Width = colX[nl-1] + colW[nl-1]
	top, bottom := math.Inf(1), math.Inf(-1)
	for i := range n {
		top, bottom = min(top, b.y[i]-sizes[i].H/2), max(bottom, b.y[i]+sizes[i].H/2)
	}
	for j := range b.y {
		b.y[j] -= top
	}
	out.Height = bottom - top
	for i := range n {
		out.Center[i] = Point{colX[out.Layer[i]] + colW[out.Layer[i]]/2, b.y[i]}
	}

	outPort, inPort := b.ports(g, sizes)
	for i := range n {
		out.Routes[i] = make([][]Point, len(b.chains[i]))
		for k, c := range b.chains[i] {
			d := g.Deps(i)[k]
			r := make([]Point, 0, 2*len(c))
			r = append(r, Point{out.Center[d].X + sizes[d].W/2, outPort[i][k]})
			for _, it := range c[1 : len(c)-1] {
				l := b.items[it].layer
				r = append(r, Point{colX[l], b.y[it]}, Point{colX[l] + colW[l], b.y[it]})
			}
			r = append(r, Point{out.Center[i].X - sizes[i].W/2, inPort[i][k]})
			out.Routes[i][k] = r
		}
	}
	return out
}

// layers gives each node the layer after its latest dependency's, then
// moves each node without dependencies to the layer before its earliest
// dependent's, so that a source feeding only late tools does not stretch
// its edges across the drawing.
func layers(g *dag.Graph) []int {
	layer := make([]int, g.Len())
	for _, i := range g.Order() {
		for _, d := range g.Deps(i) {
			layer[i] = max(layer[i], layer[d]+1)
		}
	}
	for i := range layer {
		if len(g.Deps(i)) > 0 || len(g.Dependents(i)) == 0 {
			continue
		}
		l := math.MaxInt
		for _, s := range g.Dependents(i) {
			l = min(l, layer[s]-1)
		}
		layer[i] = l
	}
	return layer
}

// split makes the layered graph: a dummy item in each layer an edge
// crosses, so that every link joins neighbouring layers.
func (b *builder) split(g *dag.Graph, layer []int) {
	n := g.Len()
	b.chains = make([][][]int, n)
	for i := range n {
		b.chains[i] = make([][]int, len(g.Deps(i)))
		for k, d := range g.Deps(i) {
			c := []int{d}
			for l := layer[d] + 1; l < layer[i]; l++ {
				b.items = append(b.items, item{node: -1, layer: l})
				c = append(c, len(b.items)-1)
			}
			c = append(c, i)
			for j := 1; j < len(c); j++ {
				b.items[c[j-1]].down = append(b.items[c[j-1]].down, c[j])
				b.items[c[j]].up = append(b.items[c[j]].up, c[j-1])
			}
			b.chains[i][k] = c
		}
	}
	nl := 0
	for _, it := range b.items {
		nl = max(nl, it.layer+1)
	}
	// Each layer in the items' order, but nodes without any edge go to
	// the end of theirs: they take no part in the crossings and would
	// only push connected nodes apart.
	b.layers = make([][]int, nl)
	b.pos = make([]int, len(b.items))
	for _, alone := range []bool{false, true} {
		for j, it := range b.items {
			if (len(it.up)+len(it.down) == 0) == alone {
				b.pos[j] = len(b.layers[it.layer])
				b.layers[it.layer] = append(b.layers[it.layer], j)
			}
		}
	}
}

// order reduces crossings: the first layer in the nodes' order, each next
// one by the barycenters of its links to the one before; then sweeps down
// and up, each followed by swaps of neighbours that cross less the other
// way round, keeping the best order seen.
func (b *builder) order() {
	for l := 1; l < len(b.layers); l++ {
		b.reorder(l, true)
	}
	b.transpose()
	best, bestC := b.snapshot(), b.crossings()
	stale := 0
	for sweep := 0; sweep < maxSweeps && bestC > 0 && stale < staleSweeps; sweep++ {
		if sweep%2 == 0 {
			for l := len(b.layers) - 2; l >= 0; l-- {
				b.reorder(l, false)
			}
		} else {
			for l := 1; l < len(b.layers); l++ {
				b.reorder(l, true)
			}
		}
		b.transpose()
		if c := b.crossings(); c < bestC {
			best, bestC, stale = b.snapshot(), c, 0
		} else {
			stale++
		}
	}
	b.restore(best)
}

func (b *builder) links(it int, up bool) []int {
	if up {
		return b.items[it].up
	}
	return b.items[it].down
}

// reorder sorts layer l by the mean position of each item's links in the
// layer before (up) or after. An item without such links keeps its place;
// the others fill the remaining places in order. The sort is stable, so
// ties keep their order.
func (b *builder) reorder(l int, up bool) {
	layer := b.layers[l]
	type keyed struct {
		it  int
		key float64
	}
	var moving []keyed
	for _, it := range layer {
		ls := b.links(it, up)
		if len(ls) == 0 {
			continue
		}
		sum := 0
		for _, x := range ls {
			sum += b.pos[x]
		}
		moving = append(moving, keyed{it, float64(sum) / float64(len(ls))})
	}
	slices.SortStableFunc(moving, func(a, c keyed) int {
		switch {
		case a.key < c.key:
			return -1
		case a.key > c.key:
			return 1
		}
		return 0
	})
	next := 0
	for j, it := range layer {
		if len(b.links(it, up)) == 0 {
			continue
		}
		layer[j] = moving[next].it
		next++
	}
	for j, it := range layer {
		b.pos[it] = j
	}
}

// transpose swaps neighbours in a layer while that lowers the crossings of
// their links on both sides.
func (b *builder) transpose() {
	var scratch [4][]int
	for range 8 {
		improved := false
		for _, layer := range b.layers {
			for j := 0; j+1 < len(layer); j++ {
				u, v := layer[j], layer[j+1]
				keep, swap := 0, 0
				for s, up := range []bool{true, false} {
					scratch[2*s] = b.sortedPos(scratch[2*s][:0], b.links(u, up))
					scratch[2*s+1] = b.sortedPos(scratch[2*s+1][:0], b.links(v, up))
					keep += inversions(scratch[2*s], scratch[2*s+1])
					swap += inversions(scratch[2*s+1], scratch[2*s])
				}
				if swap < keep {
					layer[j], layer[j+1] = v, u
					b.pos[u], b.pos[v] = j+1, j
					improved = true
				}
			}
		}
		if !improved {
			return
		}
	}
}

func (b *builder) sortedPos(dst, items []int) []int {
	for _, x := range items {
		dst = append(dst, b.pos[x])
	}
	if len(dst) > 1 {
		slices.Sort(dst)
	}
	return dst
}

// inversions counts the pairs of a before-item's link a and an after-item's
// link c with a > c: the crossings between the two items' links. Both are
// sorted.
func inversions(a, c []int) int {
	n, k := 0, 0
	for _, x := range a {
		for k < len(c) && c[k] < x {
			k++
		}
		n += k
	}
	return n
}

// crossings counts the crossing pairs of links between every two
// neighbouring layers: the links in order of their upper end, the number
// of inversions among their lower ends, with a Fenwick tree (Barth, Jünger
// and Mutzel's method).
func (b *builder) crossings() int {
	total := 0
	var ps []int
	for l := 0; l+1 < len(b.layers); l++ {
		tree := make([]int, len(b.layers[l+1])+1)
		seen := 0
		for _, u := range b.layers[l] {
			ps = b.sortedPos(ps[:0], b.items[u].down)
			for _, p := range ps {
				below := 0 // links seen so far whose lower end is at p or before
				for x := p + 1; x > 0; x -= x & -x {
					below += tree[x]
				}
				total += seen - below
			}
			for _, p := range ps {
				for x := p + 1; x < len(tree); x += x & -x {
					tree[x]++
				}
			}
			seen += len(ps)
		}
	}
	return total
}

func (b *builder) snapshot() [][]int {
	s := make([][]int, len(b.layers))
	for l, layer := range b.layers {
		s[l] = slices.Clone(layer)
	}
	return s
}

func (b *builder) restore(s [][]int) {
	b.layers = s
	for _, layer := range s {
		for j, it := range layer {
			b.pos[it] = j
		}
	}
}

// gap is the least distance between the centres of two neighbours in a
// layer.
func (b *builder) gap(u, v int) float64 {
	sep := b.o.NodeSep
	if b.items[u].node < 0 || b.items[v].node < 0 {
		sep /= 2
	}
	return (b.items[u].h+b.items[v].h)/2 + sep
}

// place gives each item its y: each layer stacked and centred on 0 first,
// then, in rounds down and up and finally both ways, each layer pulled
// toward the mean y of its links in the layer before, after or both, its
// order and gaps kept. Dummies pull harder than boxes, so long edges run
// straight.
func (b *builder) place() {
	b.y = make([]float64, len(b.items))
	for _, layer := range b.layers {
		y := 0.0
		for j, it := range layer {
			if j > 0 {
				y += b.gap(layer[j-1], it)
			}
			b.y[it] = y
		}
		for _, it := range layer {
			b.y[it] -= y / 2
		}
	}
	var t, w, gaps []float64
	for round := range placeRounds {
		both := round >= placeRounds-4
		down := round%2 == 0
		for k := range b.layers {
			l := k
			if !down {
				l = len(b.layers) - 1 - k
			}
			layer := b.layers[l]
			t, w, gaps = t[:0], w[:0], gaps[:0]
			for j, it := range layer {
				var ls []int
				switch {
				case both:
					ls = append(slices.Clone(b.items[it].up), b.items[it].down...)
				case down:
					ls = b.items[it].up
				default:
					ls = b.items[it].down
				}
				target, weight := b.y[it], 0.0
				if len(ls) > 0 {
					sum := 0.0
					for _, x := range ls {
						sum += b.y[x]
					}
					target, weight = sum/float64(len(ls)), 1
					if b.items[it].node < 0 {
						weight = 4
					}
				}
				t, w = append(t, target), append(w, weight)
				if j > 0 {
					gaps = append(gaps, b.gap(layer[j-1], it))
				}
			}
			follow(t, w, gaps)
			for j, y := range isotonic(t, w, gaps) {
				b.y[layer[j]] = y
			}
		}
	}
}

// follow gives each item without links (weight 0) a light pull toward
// the place just below the linked item above it, or just above the first
// linked one, so that unlinked items stay packed against their
// neighbours instead of where the layer was first stacked.
func follow(t, w, gaps []float64) {
	first := slices.IndexFunc(w, func(x float64) bool { return x > 0 })
	for j := range t {
		if w[j] > 0 {
			continue
		}
		if first >= 0 && j > first {
			t[j] = t[j-1] + gaps[j-1]
		}
		w[j] = 0.05
	}
	for j := first - 1; j >= 0; j-- {
		t[j] = t[j+1] - gaps[j]
	}
}

// isotonic returns the y that minimise Σ w[j]·(y[j]−t[j])² with
// y[j+1] − y[j] ≥ gap[j]: the pool-adjacent-violators algorithm on
// y[j] − (the gaps before j), which must not decrease.
func isotonic(t, w, gap []float64) []float64 {
	off := make([]float64, len(t))
	for j := 1; j < len(t); j++ {
		off[j] = off[j-1] + gap[j-1]
	}
	type block struct {
		sum, w float64
		n      int
	}
	var blocks []block
	for j := range t {
		cur := block{w[j] * (t[j] - off[j]), w[j], 1}
		for len(blocks) > 0 {
			last := blocks[len(blocks)-1]
			if last.sum/last.w < cur.sum/cur.w {
				break
			}
			cur = block{last.sum + cur.sum, last.w + cur.w, last.n + cur.n}
			blocks = blocks[:len(blocks)-1]
		}
		blocks = append(blocks, cur)
	}
	y := make([]float64, 0, len(t))
	for _, bl := range blocks {
		for range bl.n {
			y = append(y, bl.sum/bl.w+off[len(y)])
		}
	}
	return y
}

// ports spreads the ends of a node's edges along its side, in the order of
// the items they lead to, so that they leave and arrive apart.
// outPort[i][k] and inPort[i][k] are the y of the ends of the edge
// g.Deps(i)[k] -> i.
func (b *builder) ports(g *dag.Graph, sizes []Size) (outPort, inPort [][]float64) {
	n := g.Len()
	outPort, inPort = make([][]float64, n), make([][]float64, n)
	type end struct{ i, k, next int }
	outs := make([][]end, n)
	for i := range n {
		outPort[i], inPort[i] = make([]float64, len(g.Deps(i))), make([]float64, len(g.Deps(i)))
		ins := make([]end, len(g.Deps(i)))
		for k, d := range g.Deps(i) {
			c := b.chains[i][k]
			outs[d] = append(outs[d], end{i, k, c[1]})
			ins[k] = end{i, k, c[len(c)-2]}
		}
		spread(ins, b.pos, func(e end) int { return e.next }, b.y[i], sizes[i].H, func(e end, y float64) { inPort[e.i][e.k] = y })
	}
	for d := range n {
		spread(outs[d], b.pos, func(e end) int { return e.next }, b.y[d], sizes[d].H, func(e end, y float64) { outPort[e.i][e.k] = y })
	}
	return outPort, inPort
}

func spread[E any](ends []E, pos []int, next func(E) int, y, h float64, set func(E, float64)) {
	slices.SortStableFunc(ends, func(a, c E) int { return pos[next(a)] - pos[next(c)] })
	step := 0.0
	if len(ends) > 1 {
		step = min(portStep, portShare*h/float64(len(ends)-1))
	}
	for j, e := range ends {
		set(e, y+(float64(j)-float64(len(ends)-1)/2)*step)
	}
}
