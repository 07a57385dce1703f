package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
)

// Book keeps skill health in the KV bucket planbus-health, one key
// <sessionId>.<skill> per skill and session, shared by every dispatcher and
// planner. Reads come from a local copy kept current by a KV watch; changes
// are compare-and-set, so concurrent writers never lose a transition.
// It is safe for concurrent use.
type Book struct {
	kv      jetstream.KeyValue
	watcher jetstream.KeyWatcher
	mu      sync.RWMutex
	entries map[string]Record // by key
}

// Open loads the bucket and follows its changes until Close.
func Open(ctx context.Context, js jetstream.JetStream) (*Book, error) {
	kv, err := js.KeyValue(ctx, bus.BucketHealth)
	if err != nil {
		return nil, fmt.Errorf("health: health bucket: %w", err)
	}
	w, err := kv.WatchAll(context.Background())
	if err != nil {
		return nil, fmt.Errorf("health: watch health: %w", err)
	}
	b := &Book{kv: kv, watcher: w, entries: map[string]Record{}}
	initial := make(chan struct{})
	go func() {
		once := sync.OnceFunc(func() { close(initial) })
		defer once()
		for e := range w.Updates() {
			if e == nil {
				once()
				continue
			}
			b.mu.Lock()
			if e.Operation() == jetstream.KeyValuePut {
				var h Record
				if json.Unmarshal(e.Value(), &h) == nil {
					b.entries[e.Key()] = h
				}
			} else {
				delete(b.entries, e.Key())
			}
			b.mu.Unlock()
		}
	}()
	select {
	case <-initial:
	case <-ctx.Done():
		_ = w.Stop()
		return nil, ctx.Err()
	}
	return b, nil
}

// Close stops following the bucket.
func (b *Book) Close() { _ = b.watcher.Stop() }

// Keeps reports whether health is kept in the session: in every session
// but the default one (planbus.DefaultSession), which requests from anyone
// share: there every skill is healthy, and outcomes change nothing.
func Keeps(sessionID string) bool { return sessionID != planbus.DefaultSession }

// Get returns a skill's health in a session (healthy when never recorded,
// and in the default session).
func (b *Book) Get(sessionID, skill string) Record {
	if !Keeps(sessionID) {
		return Record{Skill: skill, State: Healthy}
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if h, ok := b.entries[bus.HealthKey(sessionID, skill)]; ok {
		return h
	}
	return Record{Skill: skill, State: Healthy}
}

// Session returns the recorded health of every skill in a session (none
// in the default session).
func (b *Book) Session(sessionID string) map[string]Record {
	out := map[string]Record{}
	if !Keeps(sessionID) {
		return out
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	prefix := sessionID + "."
	for k, h := range b.entries {
		if strings.HasPrefix(k, prefix) {
			out[h.Skill] = h
		}
	}
	return out
}

// Disabled returns the skills in permanentFailure in a session.
func (b *Book) Disabled(sessionID string) []string {
	var out []string
	for name, h := range b.Session(sessionID) {
		if !h.Usable() {
			out = append(out, name)
		}
	}
	return out
}

// Apply records an outcome and returns the health before and after it. A
// success of a skill already healthy with no failures counted writes
// nothing, nor does any outcome in the default session.
func (b *Book) Apply(ctx context.Context, sessionID, skill string, o Outcome) (before, after Record, err error) {
	if !Keeps(sessionID) {
		h := Record{Skill: skill, State: Healthy}
		return h, h, nil
	}
	key := bus.HealthKey(sessionID, skill)
	for range 50 {
		var rev uint64
		before = Record{Skill: skill, State: Healthy}
		e, err := b.kv.Get(ctx, key)
		switch {
		case err == nil:
			if jerr := json.Unmarshal(e.Value(), &before); jerr != nil {
				before = Record{Skill: skill, State: Healthy}
			}
			rev = e.Revision()
		case errors.Is(err, jetstream.ErrKeyNotFound):
		default:
			return before, before, err
		}
		if o.Succeeded && before.State == Healthy && before.Failures == 0 {
			return before, before, nil
		}
		after = before.Apply(o)
		data, _ := json.Marshal(after)
		if rev == 0 {
			_, err = b.kv.Create(ctx, key, data)
		} else {
			_, err = b.kv.Update(ctx, key, data, rev)
		}
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue
		}
		if err == nil {
			b.mu.Lock()
			b.entries[key] = after
			b.mu.Unlock()
		}
		return before, after, err
	}
	return before, before, fmt.Errorf("health: health of %s: too many concurrent changes", key)
}

// Quick reports whether applying o could change the recorded health; when
// it cannot (a success of a skill healthy with no failures), callers skip
// Apply and its round trip.
func (b *Book) Quick(sessionID, skill string, o Outcome) bool {
	if !Keeps(sessionID) {
		return false
	}
	h := b.Get(sessionID, skill)
	return !(o.Succeeded && h.State == Healthy && h.Failures == 0)
}

// Reset restarts a session: every skill of it back to healthy. It returns
// the skills that were not healthy.
func (b *Book) Reset(ctx context.Context, sessionID string) ([]string, error) {
	var changed []string
	for name, h := range b.Session(sessionID) {
		if h.State != Healthy {
			changed = append(changed, name)
		}
		if err := b.kv.Purge(ctx, bus.HealthKey(sessionID, name)); err != nil {
			return changed, err
		}
		b.mu.Lock()
		delete(b.entries, bus.HealthKey(sessionID, name))
		b.mu.Unlock()
	}
	return changed, nil
}
