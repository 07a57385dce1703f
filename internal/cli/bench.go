package cli

import (
	"context"
	"fmt"
)

func plannerBench(ctx context.Context, args []string, io IO) int {
	fmt.Fprintln(io.Stderr, "planner bench: not built yet")
	return ExitFailed
}
