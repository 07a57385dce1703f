package dispatcher

import (
	"fmt"
	"slices"
	"testing"
)

// Partitions are shared out evenly, the same way by every dispatcher that
// sees the same dispatchers, and one that comes or goes moves few
// partitions besides its own.
func TestAssignSharesPartitionsEvenlyAndStably(t *testing.T) {
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("d%02d-%x", i, i*7919)
		}
		return out
	}
	for _, n := range []int{1, 8, 16, 64} {
		for m := 1; m <= 9; m++ {
			owners := assign(ids(m), n)
			held := map[string]int{}
			for k, o := range owners {
				if o == "" {
					t.Fatalf("%d partitions, %d dispatchers: partition %d has no owner", n, m, k)
				}
				held[o]++
			}
			for id, h := range held {
				if h != n/m && h != n/m+1 {
					t.Errorf("%d partitions, %d dispatchers: %s holds %d, want %d or %d", n, m, id, h, n/m, n/m+1)
				}
			}
			if len(held) != min(n, m) {
				t.Errorf("%d partitions, %d dispatchers: %d hold any", n, m, len(held))
			}
			shuffled := slices.Clone(ids(m))
			slices.Reverse(shuffled)
			slices.Sort(shuffled) // dispatchers sort what they see
			if !slices.Equal(assign(shuffled, n), owners) {
				t.Errorf("%d partitions, %d dispatchers: another order of the same ids assigns otherwise", n, m)
			}
		}
	}
	// A ninth dispatcher joining eight over 64 partitions takes its share
	// of 7 or 8; the others keep most of theirs.
	before, after := assign(ids(8), 64), assign(ids(9), 64)
	moved := 0
	for k := range before {
		if before[k] != after[k] {
			moved++
		}
	}
	if moved > 24 {
		t.Errorf("a ninth dispatcher moved %d of 64 partitions", moved)
	}
}
