package cli

import (
	"time"

	"github.com/planbus/planbus/internal/dispatcher"
)

// DispatcherFlags are a dispatcher's flags: the dispatcher command's, and
// planner serve's for the dispatchers of its node.
type DispatcherFlags struct {
	shards         int
	maxConcurrency int
	ackWait        time.Duration
	id             string
}

// Register adds the flags to f.
func (d *DispatcherFlags) Register(f *Flags) {
	f.Int(&d.shards, "shards", "PLANBUS_SHARDS", 16, "plans worked on at once by this dispatcher")
	f.Int(&d.maxConcurrency, "max-concurrency", "PLANBUS_MAX_CONCURRENCY", 0, "maxConcurrency of plans that set none (default: CPU count)")
	f.Duration(&d.ackWait, "dispatcher-ack-wait", "PLANBUS_DISPATCHER_ACK_WAIT", 30*time.Second, "how soon another dispatcher takes over the messages of a dead one")
	f.String(&d.id, "dispatcher-id", "PLANBUS_DISPATCHER_ID", "", "dispatcher id (default hostname-pid)")
}

// Config is the dispatcher configuration the flags give.
func (d *DispatcherFlags) Config() dispatcher.Config {
	return dispatcher.Config{ID: d.id, Shards: d.shards, DefaultMaxConcurrency: d.maxConcurrency, AckWait: d.ackWait, Version: Version()}
}
