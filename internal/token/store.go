package token

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/internal/bus"
)

// KVKey is the key of bus.BucketKeys that holds the dispatchers' key, as
// unpadded base64url text.
const KVKey = "result-key"

// Load returns the dispatchers' key from the keys bucket. The first
// dispatcher to start finds none and stores a random one with a create
// that succeeds for only one of any dispatchers starting together; the
// others read the winner's. It fails if the stored value is not a key
// (someone wrote another value there), naming the bucket and the key.
//
// Every dispatcher must hold the same key: results signed under one are
// rejected by the others. Replacing it while plans run makes the results
// of calls already released fail the check, so their tools end only when
// their plans time out.
func Load(ctx context.Context, js jetstream.JetStream) (*Key, error) {
	kv, err := js.KeyValue(ctx, bus.BucketKeys)
	if err != nil {
		return nil, fmt.Errorf("token: keys bucket %s: %w", bus.BucketKeys, err)
	}
	var key *Key
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.MaxInterval = time.Second
	b.MaxElapsedTime = 30 * time.Second
	load := func() error {
		k, raw, err := NewKey()
		if err != nil {
			return backoff.Permanent(err)
		}
		if _, err := kv.Create(ctx, KVKey, Encode(raw)); err == nil {
			key = k
			return nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) {
			return retryable(err)
		}
		e, err := kv.Get(ctx, KVKey)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			// A replica that has not seen the create yet, or the key was
			// deleted in between: try again.
			return err
		}
		if err != nil {
			return retryable(err)
		}
		if key, err = Decode(e.Value()); err != nil {
			return backoff.Permanent(fmt.Errorf("token: %s in bucket %s: %w (delete it to have a new one made)",
				KVKey, bus.BucketKeys, err))
		}
		return nil
	}
	if err := backoff.Retry(load, backoff.WithContext(b, ctx)); err != nil {
		if errors.Is(err, ErrBadKey) {
			return nil, err
		}
		return nil, fmt.Errorf("token: load key %s from bucket %s: %w", KVKey, bus.BucketKeys, err)
	}
	return key, nil
}

// Encode is the stored form of a key's bytes: unpadded base64url.
func Encode(raw []byte) []byte { return []byte(enc.EncodeToString(raw)) }

// Decode returns the key whose stored form is text.
func Decode(text []byte) (*Key, error) {
	raw, err := enc.DecodeString(string(text))
	if err != nil {
		return nil, fmt.Errorf("%w: not base64url: %v", ErrBadKey, err)
	}
	return FromBytes(raw)
}

// retryable lets timeouts be tried again and makes every other error (a
// permissions violation, say) final.
func retryable(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) {
		return err
	}
	return backoff.Permanent(err)
}
