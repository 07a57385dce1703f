package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/internal/bus"
)

// Store reads and patches session documents in the KV bucket
// planbus-sessions. It is safe for concurrent use.
type Store struct {
	kv jetstream.KeyValue
}

// Open binds a Store to the bucket.
func Open(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	kv, err := js.KeyValue(ctx, bus.BucketSessions)
	if err != nil {
		return nil, fmt.Errorf("session: bucket: %w", err)
	}
	return &Store{kv: kv}, nil
}

// Get returns a session's state; an unknown session is empty.
func (s *Store) Get(ctx context.Context, sessionID string) (map[string]any, error) {
	e, err := s.kv.Get(ctx, sessionID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, err
	}
	var st map[string]any
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return nil, fmt.Errorf("session %s: %w", sessionID, err)
	}
	if st == nil {
		st = map[string]any{}
	}
	return st, nil
}

// Patch deep-merges patch into the session's state with compare-and-set,
// retrying on conflict, so concurrent patches never lose an update. It
// returns the new state.
func (s *Store) Patch(ctx context.Context, sessionID string, patch []byte) ([]byte, error) {
	for range 100 {
		var cur []byte
		var rev uint64
		e, err := s.kv.Get(ctx, sessionID)
		switch {
		case err == nil:
			cur, rev = e.Value(), e.Revision()
		case errors.Is(err, jetstream.ErrKeyNotFound):
		default:
			return nil, err
		}
		next, err := MergeJSON(cur, patch)
		if err != nil {
			return nil, err
		}
		if rev == 0 {
			_, err = s.kv.Create(ctx, sessionID, next)
		} else {
			_, err = s.kv.Update(ctx, sessionID, next, rev)
		}
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return next, nil
	}
	return nil, fmt.Errorf("session %s: too many concurrent patches", sessionID)
}

// Delete removes a session's state.
func (s *Store) Delete(ctx context.Context, sessionID string) error {
	return s.kv.Purge(ctx, sessionID)
}
