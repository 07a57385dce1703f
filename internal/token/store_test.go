package token_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/token"
)

// Dispatchers starting together all end up with the one key stored.
func TestLoadGivesEveryoneTheSameKey(t *testing.T) {
	cfg := bustest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 8
	keys := make([]*token.Key, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		conn := bustest.Dial(t, cfg)
		wg.Go(func() { keys[i], errs[i] = token.Load(ctx, conn.JS) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Load %d: %v", i, err)
		}
	}
	want := keys[0].Result("p", "a", 1)
	for i, k := range keys {
		if got := k.Result("p", "a", 1); got != want {
			t.Errorf("Load %d signs %s, Load 0 %s", i, got, want)
		}
	}
	kv, err := bustest.Dial(t, cfg).JS.KeyValue(ctx, bus.BucketKeys)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, token.KVKey)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := token.Decode(e.Value())
	if err != nil || stored.Result("p", "a", 1) != want {
		t.Errorf("the stored key is not the one loaded (err %v)", err)
	}
	if e.Revision() != 1 {
		t.Errorf("key stored at revision %d, want 1: written once", e.Revision())
	}
}

func TestLoadRefusesAValueThatIsNotAKey(t *testing.T) {
	cfg := bustest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := bustest.Dial(t, cfg)
	kv, err := conn.JS.KeyValue(ctx, bus.BucketKeys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, token.KVKey, []byte("hunter2")); err != nil {
		t.Fatal(err)
	}
	_, err = token.Load(ctx, conn.JS)
	if !errors.Is(err, token.ErrBadKey) || !strings.Contains(err.Error(), bus.BucketKeys) || !strings.Contains(err.Error(), token.KVKey) {
		t.Errorf("got %v, want ErrBadKey naming the bucket %s and the key %s", err, bus.BucketKeys, token.KVKey)
	}
}
