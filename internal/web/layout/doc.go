// Package layout draws a DAG in layers, left to right: where each node's
// box goes and which way each edge runs. It is the web view's drawing of a
// plan, in place of Graphviz's dot engine, and follows the same scheme
// (Sugiyama's): nodes in layers by their longest path from a source, a
// dummy node wherever an edge crosses a layer, barycenter sweeps and
// adjacent swaps to reduce crossings, then each layer's positions pulled
// toward their neighbours' with the order and the gaps kept (an isotonic
// regression per layer).
//
// The package is pure: explicit input (a dag.Graph and each node's size),
// no I/O, no goroutines, and the same input always gives the same layout.
// A plan of 300 tools, each depending on up to three of the twenty before
// it (over a thousand dummies), takes about 20 ms (BenchmarkLayered300).
package layout
