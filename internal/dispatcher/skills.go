package dispatcher

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
)

// skillSet mirrors the manifests in the skills bucket through a KV watch.
type skillSet struct {
	kv      jetstream.KeyValue
	watcher jetstream.KeyWatcher
	mu      sync.RWMutex
	names   map[string]*planbus.SkillManifest // nil value: deleted
}

func watchSkills(ctx context.Context, js jetstream.JetStream) (*skillSet, error) {
	kv, err := js.KeyValue(ctx, bus.BucketSkills)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: skills bucket: %w", err)
	}
	w, err := kv.WatchAll(context.Background())
	if err != nil {
		return nil, fmt.Errorf("dispatcher: watch skills: %w", err)
	}
	s := &skillSet{kv: kv, watcher: w, names: map[string]*planbus.SkillManifest{}}
	initial := make(chan struct{})
	go func() {
		once := sync.OnceFunc(func() { close(initial) })
		for e := range w.Updates() {
			if e == nil { // the end of the initial values
				once()
				continue
			}
			var m *planbus.SkillManifest
			if e.Operation() == jetstream.KeyValuePut {
				m = &planbus.SkillManifest{}
				if json.Unmarshal(e.Value(), m) != nil {
					m = &planbus.SkillManifest{Name: e.Key()}
				}
			}
			s.mu.Lock()
			s.names[e.Key()] = m
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

func (s *skillSet) has(name string) bool { return s.manifest(name) != nil }

func (s *skillSet) manifest(name string) *planbus.SkillManifest {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.names[name]
}

// lookup asks the bucket directly, for a skill advertised a moment ago
// whose watch update has not arrived yet.
func (s *skillSet) lookup(ctx context.Context, name string) *planbus.SkillManifest {
	e, err := s.kv.Get(ctx, name)
	if err != nil {
		return nil
	}
	m := &planbus.SkillManifest{}
	if json.Unmarshal(e.Value(), m) != nil {
		m = &planbus.SkillManifest{Name: name}
	}
	s.mu.Lock()
	s.names[name] = m
	s.mu.Unlock()
	return m
}

// list returns the names of the advertised skills.
func (s *skillSet) list() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.names))
	for name, m := range s.names {
		if m != nil {
			out = append(out, name)
		}
	}
	return out
}

func (s *skillSet) stop() { _ = s.watcher.Stop() }
