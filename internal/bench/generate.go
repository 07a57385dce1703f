package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// Scaling is the scaling set `planner bench --scale` runs: chains, fan-outs
// and many plans at growing sizes.
var Scaling = []string{
	"chain-10", "chain-100", "chain-1000",
	"fanout-100", "fanout-1000", "fanout-10000", "fanout-50000",
	"many-plans-100", "many-plans-1000", "many-plans-5000",
}

// generatedConcurrency is the generated workloads' maxConcurrency, the
// built-in ones'.
const generatedConcurrency = 64

// maxGenerated bounds N in a generated workload's name.
const maxGenerated = 1_000_000

// Generate makes a workload from its name, shaped as the built-in ones of
// the same family:
//   - chain-N: N no-op tools in a line, t0 → t1 → … (chain-100 is the
//     built-in chain-100);
//   - fanout-N: root → N parallel no-op tools → join, N+2 tools
//     (fanout-1000 is the built-in fanout-1000);
//   - many-plans-N: N concurrent instances of the 5-tool no-op diamond
//     A → B,C,D → E (many-plans is many-plans-200).
//
// Each has maxConcurrency 64. The plan size limit is not checked here:
// Workload.Plan refuses a plan the schema refuses.
func Generate(name string) (*Workload, error) {
	family, num, ok := cutLast(name, "-")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n < 1 || n > maxGenerated {
		return nil, fmt.Errorf("bench: workload %q: not a built-in one, nor chain-N, fanout-N or many-plans-N with N from 1 to %d", name, maxGenerated)
	}
	w := &Workload{Name: name, MaxConcurrency: generatedConcurrency, Instances: 1}
	switch family {
	case "chain":
		w.Description = fmt.Sprintf("%d sequential no-op tools", n)
		w.Tools = make([]Tool, n)
		for i := range w.Tools {
			w.Tools[i].ToolID = "t" + strconv.Itoa(i)
			w.Tools[i].Dependencies = []string{}
			if i > 0 {
				w.Tools[i].Dependencies = []string{w.Tools[i-1].ToolID}
			}
		}
	case "fanout":
		w.Description = fmt.Sprintf("root -> %d parallel no-op tools -> join (%d tools in all)", n, n+2)
		w.Tools = make([]Tool, 0, n+2)
		w.Tools = append(w.Tools, Tool{ToolID: "root", Dependencies: []string{}})
		join := make([]string, n)
		for i := range n {
			join[i] = "f" + strconv.Itoa(i)
			w.Tools = append(w.Tools, Tool{ToolID: join[i], Dependencies: []string{"root"}})
		}
		w.Tools = append(w.Tools, Tool{ToolID: "join", Dependencies: join})
	case "many-plans":
		w.Description = fmt.Sprintf("%d concurrent instances of a 5-tool no-op diamond A -> B,C,D -> E", n)
		w.Instances = n
		w.Tools = []Tool{{ToolID: "A", Dependencies: []string{}}, {ToolID: "B", Dependencies: []string{"A"}},
			{ToolID: "C", Dependencies: []string{"A"}}, {ToolID: "D", Dependencies: []string{"A"}},
			{ToolID: "E", Dependencies: []string{"B", "C", "D"}}}
	default:
		return nil, fmt.Errorf("bench: workload %q: not a built-in one, nor chain-N, fanout-N or many-plans-N", name)
	}
	return w, nil
}

// cutLast splits s around the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// Select returns the workloads named, in the order named: each a workload
// of from with that name, or else a generated one (Generate).
func Select(from []*Workload, names []string) ([]*Workload, error) {
	var out []*Workload
	for _, name := range names {
		found := false
		for _, w := range from {
			if w.Name == name {
				out, found = append(out, w), true
				break
			}
		}
		if found {
			continue
		}
		w, err := Generate(name)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}
