package embedded_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/embedded"
)

func TestListenConflictNamesTheAddress(t *testing.T) {
	cfg := bustest.Start(t)
	addr := strings.TrimPrefix(cfg.URL, "nats://")
	_, err := embedded.Start(context.Background(), bus.Config{Listen: addr, DataDir: t.TempDir()}, zerolog.Nop())
	if !errors.Is(err, embedded.ErrListen) {
		t.Fatalf("err = %v, want ErrListen", err)
	}
	if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "--nats-url") {
		t.Errorf("message %q should name %s and suggest --nats-url", err, addr)
	}
}

// Two embedded servers on one data dir would corrupt its store: the second
// is refused, naming the holder, and may start once the first is gone.
func TestDataDirIsLocked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := bus.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir()}
	first, err := embedded.Start(ctx, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	_, err = embedded.Start(ctx, cfg, zerolog.Nop())
	if !errors.Is(err, embedded.ErrDataDirInUse) || !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) {
		first.Shutdown()
		t.Fatalf("second server on the dir: %v, want ErrDataDirInUse naming PID %d", err, os.Getpid())
	}
	first.Shutdown()
	again, err := embedded.Start(ctx, cfg, zerolog.Nop())
	if err != nil {
		t.Fatalf("a server on the dir after the first stopped: %v", err)
	}
	again.Shutdown()
}
