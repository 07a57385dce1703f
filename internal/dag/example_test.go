package dag_test

import (
	"fmt"

	"github.com/planbus/planbus/internal/dag"
)

func Example() {
	g, err := dag.New([]dag.Node{
		{ID: "A"},
		{ID: "B", Deps: []string{"A"}},
		{ID: "C", Deps: []string{"A"}},
		{ID: "D", Deps: []string{"B", "C"}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(g.OrderIDs())

	_, err = dag.New([]dag.Node{{ID: "A"}, {ID: "B", Deps: []string{"A", "C"}}, {ID: "C", Deps: []string{"B"}}})
	fmt.Println(err)
	// Output:
	// [A B C D]
	// cycle: B -> C -> B
}
