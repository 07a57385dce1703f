package dag

// CriticalPath returns the chain of dependent nodes, from a root to a
// leaf, whose weights add up to the most: the chain that bounds how soon
// the whole graph can finish when each node takes weight(i). Of chains
// with the same total it picks the one of more nodes, then the one that
// comes first in Kahn order, so that a graph whose weights are all zero
// (nothing has run yet) gets its longest chain. weight must not be
// negative. An empty graph has no path.
func (g *Graph) CriticalPath(weight func(i int) int64) []int {
	n := len(g.ids)
	if n == 0 {
		return nil
	}
	total := make([]int64, n) // the best chain ending at i, i included
	count := make([]int, n)
	prev := make([]int, n)
	better := func(t1 int64, c1 int, t2 int64, c2 int) bool {
		return t1 > t2 || (t1 == t2 && c1 > c2)
	}
	end := -1
	for _, i := range g.order {
		prev[i] = -1
		for _, d := range g.Deps(i) {
			if prev[i] == -1 || better(total[d], count[d], total[prev[i]], count[prev[i]]) {
				prev[i] = d
			}
		}
		total[i], count[i] = weight(i), 1
		if p := prev[i]; p >= 0 {
			total[i] += total[p]
			count[i] += count[p]
		}
		if end == -1 || better(total[i], count[i], total[end], count[end]) {
			end = i
		}
	}
	var path []int
	for i := end; i >= 0; i = prev[i] {
		path = append(path, i)
	}
	for a, b := 0, len(path)-1; a < b; a, b = a+1, b-1 {
		path[a], path[b] = path[b], path[a]
	}
	return path
}
