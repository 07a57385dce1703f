package bus_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
)

// persistModes reads the persist mode and write-behind of every planbus
// stream and of the plans bucket's.
func persistModes(t *testing.T, c *bus.Conn) map[string]time.Duration {
	t.Helper()
	ctx := context.Background()
	got := map[string]time.Duration{}
	names := []string{"KV_" + bus.BucketPlans, "KV_" + bus.BucketRequests}
	for _, sc := range c.Config.Streams() {
		names = append(names, sc.Name)
	}
	for _, name := range names {
		s, err := c.JS.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		cfg := s.CachedInfo().Config
		if (cfg.PersistMode == jetstream.AsyncPersistMode) != (bus.WriteBehindOf(&cfg) > 0) {
			t.Fatalf("stream %s: persist mode %v, write-behind %s", name, cfg.PersistMode, bus.WriteBehindOf(&cfg))
		}
		got[name] = bus.WriteBehindOf(&cfg)
	}
	return got
}

func TestDeclareWritesOnlyDerivedStoresBehind(t *testing.T) {
	cfg := bustest.StartBare(t)
	cfg.WriteBehind = 3 * time.Second
	c := bustest.Dial(t, cfg)
	ctx := context.Background()
	if err := c.Declare(ctx); err != nil {
		t.Fatal(err)
	}
	if want := []string{bus.StreamTools, "KV_" + bus.BucketPlans, bus.StreamExecutions}; !slices.Equal(bus.WrittenBehind, want) {
		t.Fatalf("written behind: %v, want %v (only what dispatchers derive again)", bus.WrittenBehind, want)
	}
	got := persistModes(t, c)
	for name, behind := range got {
		want := time.Duration(0)
		if slices.Contains(bus.WrittenBehind, name) {
			want = 3 * time.Second
		}
		if behind != want {
			t.Errorf("stream %s: written behind by %s, want %s", name, behind, want)
		}
	}
	// The bucket is a key-value bucket as any other.
	kv, err := c.JS.KeyValue(ctx, bus.BucketPlans)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "p1.state", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "p1.state", []byte(`{}`)); err == nil {
		t.Fatal("a second Create of a key succeeded")
	}
	if st, err := kv.Status(ctx); err != nil || st.History() != 1 || st.TTL() != bus.DefaultRetention {
		t.Fatalf("bucket status: %v, %v", st, err)
	}

	// A process that joins declares without write-behind of its own: the
	// stores keep theirs (a persist mode cannot be changed), and so does a
	// declare asking for another delay of a store that flushes each write.
	joined := cfg
	joined.WriteBehind = 0
	jc := bustest.Dial(t, joined)
	if err := jc.Declare(ctx); err != nil {
		t.Fatalf("declare without write-behind on a store written behind: %v", err)
	}
	again := persistModes(t, jc)
	for _, name := range bus.WrittenBehind {
		if again[name] != 3*time.Second {
			t.Fatalf("after a declare without write-behind: %v", again)
		}
	}
}

func TestAStoreFlushedEachWriteStaysSo(t *testing.T) {
	cfg := bustest.StartBare(t)
	cfg.WriteBehind = 0 // as stores were created before write-behind
	c := bustest.Dial(t, cfg)
	ctx := context.Background()
	if err := c.Declare(ctx); err != nil {
		t.Fatal(err)
	}
	cfg.WriteBehind = 2 * time.Second
	wc := bustest.Dial(t, cfg)
	if err := wc.Declare(ctx); err != nil {
		t.Fatalf("declare with write-behind on a store created without: %v", err)
	}
	for name, behind := range persistModes(t, wc) {
		if behind != 0 {
			t.Errorf("stream %s of a store created flushing each write is now written behind by %s", name, behind)
		}
	}
}

func TestSyncSaysWhatIsWrittenBehind(t *testing.T) {
	if got := bus.DefaultSync.WriteBehind(); got != bus.DefaultWriteBehind {
		t.Errorf("Sync always: write-behind %s, want %s", got, bus.DefaultWriteBehind)
	}
	if got := (bus.Sync{Interval: time.Second}).WriteBehind(); got != 0 {
		t.Errorf("Sync 1s: write-behind %s, want none", got)
	}
	if got := bus.DefaultSync.FlushInterval(); got != bus.DefaultWriteBehind/2 {
		t.Errorf("Sync always: the server flushes what is written behind every %s, want %s", got, bus.DefaultWriteBehind/2)
	}
}
