package planbustest_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// The SDK as a program of its own uses it: a test in a module outside
// planbus's, which requires planbus through a replace of this checkout,
// builds plans, a typed skill and a node with the public packages alone,
// and passes with go test (testdata/wordflow).
func TestAModuleOfItsOwnUsesTheSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests a module of its own; skipped with -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	ours, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(ours)
	dir := t.TempDir()
	mod := "module example.com/wordflow\n\n" + string(goLine) + "\n\n" +
		"require github.com/planbus/planbus v0.0.0\n\n" +
		"replace github.com/planbus/planbus => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("testdata", "wordflow", "wordflow_test.go.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(mod), "go.sum": sum, "wordflow_test.go": src} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, goTool, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("go %v in a module of its own: %v\n%s", args, err, out.String())
		}
	}
	run("mod", "tidy")
	run("test", "-count=1", "./...")
}
