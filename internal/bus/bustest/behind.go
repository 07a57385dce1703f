package bustest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/internal/bus"
)

// ReplicaBehind makes the server answer about half of the direct gets of
// bucket's keys as a replica that is behind does (a node just back from a
// crash or a partition): with an older value, or none for a key written
// since. The replica is a mirror of the bucket's stream that answers the
// bucket's direct gets beside it (mirror_direct; the two form a queue
// group) and holds one unrelated key of it only. It returns once a direct
// get of a key the bucket has was answered "no such key".
func ReplicaBehind(t testing.TB, c *bus.Conn, bucket string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := c.JS.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	// The mirror answers direct gets once it has taken in a message.
	for _, key := range []string{"replica-behind-has", "replica-behind-lacks"} {
		if _, err := kv.Put(ctx, key, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	stream := "KV_" + bucket
	if _, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "REPLICA_BEHIND_" + bucket, MirrorDirect: true,
		Mirror: &jetstream.StreamSource{Name: stream, FilterSubject: bus.KVSubject(bucket, "replica-behind-has")}}); err != nil {
		t.Fatal(err)
	}
	lacks := "$JS.API.DIRECT.GET." + stream + "." + bus.KVSubject(bucket, "replica-behind-lacks")
	Eventually(t, 30*time.Second, "a direct get of "+bucket+" answered by the replica behind", func() (bool, string) {
		r, err := c.NC.Request(lacks, nil, 5*time.Second)
		if err != nil {
			return false, err.Error()
		}
		return r.Header.Get("Status") == "404", "status " + r.Header.Get("Status")
	})
}
