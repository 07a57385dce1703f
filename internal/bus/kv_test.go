package bus_test

import (
	"context"
	"testing"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
)

// KVReadSure answers what the bucket's leader holds, whichever replica a
// direct get reaches: a key the replica behind lacks is found, a deleted
// or purged key is none, a key never written is none.
func TestKVReadSureAsksTheLeaderForNone(t *testing.T) {
	cfg := bustest.Start(t)
	c := bustest.Dial(t, cfg)
	ctx := context.Background()
	kv, err := c.JS.KeyValue(ctx, bus.BucketPlans)
	if err != nil {
		t.Fatal(err)
	}
	bustest.ReplicaBehind(t, c, bus.BucketPlans)
	for _, k := range []string{"kept", "deleted", "purged"} {
		if _, err := kv.Put(ctx, k, []byte(`{"k":"`+k+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := kv.Delete(ctx, "deleted"); err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, "purged"); err != nil {
		t.Fatal(err)
	}
	sure, plain := bus.KVReadSure(c.NC, kv), bus.KVRead(kv)
	missed := 0
	for range 40 {
		v, rev, err := sure(ctx, "kept")
		if err != nil || string(v) != `{"k":"kept"}` || rev == 0 {
			t.Fatalf("kept: %q at revision %d, %v", v, rev, err)
		}
		if v, _, _ := plain(ctx, "kept"); v == nil {
			missed++
		}
		for _, k := range []string{"deleted", "purged", "never"} {
			if v, _, err := sure(ctx, k); err != nil || v != nil {
				t.Fatalf("%s: %q, %v; want none", k, v, err)
			}
		}
	}
	if missed == 0 {
		t.Error("a plain read never reached the replica behind: the test shows nothing")
	}
}
