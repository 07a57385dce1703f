package dispatcher

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/internal/bus"
)

// skillSet mirrors the names in the skills bucket through a KV watch.
type skillSet struct {
	kv      jetstream.KeyValue
	watcher jetstream.KeyWatcher
	mu      sync.RWMutex
	names   map[string]bool
}

func watchSkills(ctx context.Context, js jetstream.JetStream) (*skillSet, error) {
	kv, err := js.KeyValue(ctx, bus.BucketSkills)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: skills bucket: %w", err)
	}
	w, err := kv.WatchAll(context.Background(), jetstream.MetaOnly())
	if err != nil {
		return nil, fmt.Errorf("dispatcher: watch skills: %w", err)
	}
	s := &skillSet{kv: kv, watcher: w, names: map[string]bool{}}
	initial := make(chan struct{})
	go func() {
		once := sync.OnceFunc(func() { close(initial) })
		for e := range w.Updates() {
			if e == nil { // the end of the initial values
				once()
				continue
			}
			s.mu.Lock()
			s.names[e.Key()] = e.Operation() == jetstream.KeyValuePut
			s.mu.Unlock()
		}
		once()
	}()
	select {
	case <-initial:
	case <-ctx.Done():
		_ = w.Stop()
		return nil, ctx.Err()
	}
	return s, nil
}

func (s *skillSet) has(name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.names[name]
}

// lookup asks the bucket directly, for a skill advertised a moment ago
// whose watch update has not arrived yet.
func (s *skillSet) lookup(ctx context.Context, name string) bool {
	_, err := s.kv.Get(ctx, name)
	return err == nil
}

func (s *skillSet) stop() { _ = s.watcher.Stop() }
