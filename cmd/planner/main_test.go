package main

import (
	"os/exec"
	"strings"
	"testing"
)

// Every planner command starts the process, so what a package does at
// init every command pays for: planner version and planner htn as much as
// planner serve. Graphviz compiled to WebAssembly (go-graphviz, run by
// wazero) took 40 MB and 37-66 ms at every start for the web view alone;
// the view now lays its DAGs out in pure Go (internal/web/layout). No
// WebAssembly runtime may come back into the binary.
func TestNoWebAssemblyRuntime(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH, so the planner's dependencies cannot be listed")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/planner: %v\n%s", err, out)
	}
	banned := []string{"github.com/goccy/go-graphviz", "github.com/tetratelabs/wazero", "github.com/bytecodealliance/wasmtime-go", "github.com/wasmerio/wasmer-go"}
	for pkg := range strings.Lines(string(out)) {
		pkg = strings.TrimSpace(pkg)
		for _, b := range banned {
			if pkg == b || strings.HasPrefix(pkg, b+"/") {
				t.Errorf("cmd/planner links %s: every command would pay for it at start", pkg)
			}
		}
	}
	if !strings.Contains(string(out), "github.com/planbus/planbus/internal/web/layout\n") {
		t.Errorf("cmd/planner does not link internal/web/layout: where are its DAGs laid out?")
	}
}
