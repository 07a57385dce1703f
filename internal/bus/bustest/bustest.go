package bustest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/embedded"
)

// WriteBehind is the write-behind of the servers the helpers start.
const WriteBehind = 200 * time.Millisecond

// Start runs an embedded server with every planbus stream and bucket
// declared, and returns a config whose URL points at it.
func Start(t testing.TB) bus.Config {
	t.Helper()
	return declared(t, startBare(t, 0))
}

// SmallPayload is the largest message of a StartSmall server: the least a
// planbus server may be given.
const SmallPayload = 1 << 20

// StartSmall is Start with a server whose largest message is SmallPayload
// bytes rather than the default 8 MiB: tests of what is too large to
// carry or to store build messages an eighth the size, and take an eighth
// of the time, on the limits that are computed from it the same way.
func StartSmall(t testing.TB) bus.Config {
	t.Helper()
	return declared(t, startBare(t, SmallPayload))
}

func declared(t testing.TB, cfg bus.Config) bus.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := Dial(t, cfg)
	if err := c.Declare(ctx); err != nil {
		t.Fatalf("bustest: declare: %v", err)
	}
	return cfg
}

// StartBare runs an embedded server, adjusted by opts (authentication,
// TLS), and declares nothing: the config's URL points at it, and the
// caller fills in what a client needs to get in.
func StartBare(t testing.TB, opts ...embedded.Option) bus.Config {
	t.Helper()
	return startBare(t, 0, opts...)
}

func startBare(t testing.TB, maxPayload int32, opts ...embedded.Option) bus.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// As a node's embedded server, plan states and calls are written
	// behind (bus.Config.WriteBehind), here flushed every 100 ms so that
	// a dispatcher stopping waits at most that for its acknowledgements.
	cfg := bus.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), DuplicateWindow: time.Minute, MaxPayload: maxPayload,
		WriteBehind: WriteBehind}
	srv, err := embedded.Start(ctx, cfg, zerolog.Nop(), opts...)
	if err != nil {
		t.Fatalf("bustest: start server: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	cfg.URL = srv.ClientURL()
	return cfg
}

// Dial opens a connection closed by t.Cleanup.
func Dial(t testing.TB, cfg bus.Config) *bus.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := bus.Dial(ctx, cfg, zerolog.Nop())
	if err != nil {
		t.Fatalf("bustest: dial: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// StartAuth runs an embedded server with authorization on: a user per
// role (bus.Roles) whose seeds it returns, every stream and bucket
// declared by the admin, and a user per worker group given (their Name
// and Skills). The config's URL points at the server and names no seed:
// set NKeySeedFile (and Role) to connect as someone.
func StartAuth(t testing.TB, groups ...bus.WorkerGroup) (bus.Config, *bus.Seeds) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "auth")
	for _, g := range groups {
		if err := bus.AddWorkerGroup(dir, g.Name, g.Skills); err != nil {
			t.Fatalf("bustest: worker group: %v", err)
		}
	}
	seeds, err := bus.EnsureSeeds(dir)
	if err != nil {
		t.Fatalf("bustest: seeds: %v", err)
	}
	cfg := StartBare(t, embedded.Auth(seeds))
	admin := cfg
	admin.NKeySeedFile, admin.Role = seeds.File(bus.RoleAdmin), bus.RoleAdmin
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Dial(t, admin).Declare(ctx); err != nil {
		t.Fatalf("bustest: declare: %v", err)
	}
	return cfg, seeds
}

// Log is the logger of what a test starts on these servers: it logs
// nothing. planbustest hands it on rather than import zerolog, which its
// API (log/slog's, as the SDK's) does not use.
func Log() zerolog.Logger { return zerolog.Nop() }

// Eventually waits until cond holds, asking it every few milliseconds,
// and fails the test if it does not within the time given: for what
// raises no event a test can wait on (a KV watch catching up, a counter a
// scrape reads). cond returns whether it holds and, for the failure
// message, what it saw. Prefer waiting on an event (a channel, a
// subscription) where there is one.
func Eventually(t testing.TB, within time.Duration, what string, cond func() (ok bool, saw string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so within %s; saw: %s", what, within, saw)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// SyncBuffer is a bytes.Buffer that a component's goroutines may write
// (its log, a command's output) while the test reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is what was written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// RepoRoot is the directory holding the module's go.mod, found by walking
// up from the directory the test runs in (its package's).
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
