package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// KVRead reads keys of kv: a key's value and revision, or a nil value if
// the key has none. It is an execution.Getter.
func KVRead(kv jetstream.KeyValue) func(ctx context.Context, key string) ([]byte, uint64, error) {
	return func(ctx context.Context, key string) ([]byte, uint64, error) {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, 0, nil
		}
		if err != nil {
			return nil, 0, fmt.Errorf("%s %s: %w", kv.Bucket(), key, err)
		}
		return e.Value(), e.Revision(), nil
	}
}
