package dispatcher

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A plan is started when its message comes (and the message acknowledged
// once it is), so a dispatcher that falls behind on the results and timers
// it has received would go on starting every plan sent to it: the plans
// in flight, and with them what every component holds for them (plan
// states, calls, deliveries awaiting their ack), grow without bound, each
// message costs more than the last, and a node pushed past its rate does
// not slow to its rate, it falls to a few plans a second.
//
// So a plan waits before it is handed to its shard while the shard has
// more than intakeBacklog messages it has received and not applied, and
// its partition's next plans wait behind it: plans wait in their stream,
// which costs disk, until the dispatcher has caught up. The bound is on
// what the dispatcher has not yet applied, not on plans in flight: plans
// that wait hours for an approval or a long tool hold up no intake.
const intakeBacklog = 256

// intakePoll is how often a waiting plan looks at its shard's backlog.
const intakePoll = 5 * time.Millisecond

// awaitRoom returns once shard s has room for plan message m (at once, unless
// the shard is behind), telling the server the message is in progress
// while it waits, so that it is not delivered again.
func (d *Dispatcher) awaitRoom(s *shard, m jetstream.Msg) {
	if len(s.in) <= intakeBacklog {
		return
	}
	d.stats.IntakeWaits.Add(1)
	poll := time.NewTicker(intakePoll)
	defer poll.Stop()
	progress := time.Now()
	for len(s.in) > intakeBacklog {
		select {
		case <-poll.C:
		case <-d.closed:
			return
		}
		if time.Since(progress) >= d.cfg.AckWait/3 {
			_ = m.InProgress()
			progress = time.Now()
		}
	}
}
