package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// KVRead reads keys of kv: a key's value and revision, or a nil value if
// the key has none. It is an execution.Getter.
//
// Reads are direct gets, which any replica of the bucket answers: one
// that is behind (a node just back from a crash or a partition) answers
// with an older value, or with none for a key written a moment ago. Where
// "no such key" decides something that cannot be undone, read with
// KVReadSure.
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

// KVReadSure is KVRead that does not take a replica's word that a key has
// no value: it asks the bucket's stream leader, which has every write
// acknowledged, before it answers nil. A chaos run found a dispatcher
// telling a worker that a plan started a moment before had ended, because
// the replica that answered had just rejoined the cluster: the worker
// dropped the plan's call and the plan timed out.
func KVReadSure(nc *nats.Conn, kv jetstream.KeyValue) func(ctx context.Context, key string) ([]byte, uint64, error) {
	read := KVRead(kv)
	return func(ctx context.Context, key string) ([]byte, uint64, error) {
		v, rev, err := read(ctx, key)
		if err != nil || v != nil {
			return v, rev, err
		}
		return kvLeaderGet(ctx, nc, kv.Bucket(), key)
	}
}

// kvLeaderGet reads a key's last value from its bucket's stream leader
// ($JS.API.STREAM.MSG.GET, not a direct get): nil if it has none or the
// last operation deleted or purged it.
func kvLeaderGet(ctx context.Context, nc *nats.Conn, bucket, key string) ([]byte, uint64, error) {
	req, _ := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{KVSubject(bucket, key)})
	m, err := nc.RequestWithContext(ctx, jsAPI("STREAM", "MSG", "GET", kvStream(bucket)), req)
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s from its leader: %w", bucket, key, err)
	}
	var resp struct {
		Message *struct {
			Seq    uint64 `json:"seq"`
			Header []byte `json:"hdrs"`
			Data   []byte `json:"data"`
		} `json:"message"`
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, 0, fmt.Errorf("%s %s from its leader: %w", bucket, key, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == int(jetstream.JSErrCodeMessageNotFound):
		return nil, 0, nil
	case resp.Error != nil:
		return nil, 0, fmt.Errorf("%s %s from its leader: %s (%d)", bucket, key, resp.Error.Description, resp.Error.ErrCode)
	case resp.Message == nil:
		return nil, 0, fmt.Errorf("%s %s from its leader: an answer with no message", bucket, key)
	}
	if len(resp.Message.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Header)
		if err != nil {
			return nil, 0, fmt.Errorf("%s %s from its leader: headers: %w", bucket, key, err)
		}
		if op := h.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
			return nil, 0, nil
		}
	}
	return resp.Message.Data, resp.Message.Seq, nil
}
