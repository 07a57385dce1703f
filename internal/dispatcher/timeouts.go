package dispatcher

import (
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/execution"
)

// A running plan's timeout waits in the TIMERS stream as a message
// schedule (bus.TimeoutScheduleSubject): the server keeps it in its
// index of schedules and, when it is due, publishes the timer on the
// plan's timers subject, where the dispatchers' consumers take it like
// any timer that is due. A timer that is not due is otherwise delivered
// and postponed (route), and held by its consumer as an unacknowledged
// delivery until it is: the server walks and writes out those held
// deliveries as the consumer's acknowledgements go, so tens of thousands
// of running plans' timeouts (a node behind its rate) made every
// acknowledgement dearer until the node fell to a few plans a second.
// Retry timers, due in seconds, are still postponed that way.
//
// When the plan ends first, the schedule is purged by its literal subject,
// without waiting for the server's answer (unschedule). Should the purge
// be lost, or the plan end on another dispatcher, the timer fires at its
// time as one of an ended plan, which is ignored.

// timeoutSchedule is the message that has the server publish timer tm, a
// plan's timeout, on the plan's timers subject when it is due.
func timeoutSchedule(tm execution.TimerMessage) *nats.Msg {
	m := &nats.Msg{Subject: bus.TimeoutScheduleSubject(tm.PlanID), Data: mustJSON(tm), Header: nats.Header{}}
	// Milliseconds: the server reads the time as RFC 3339, fractions
	// included, where nats.go's WithScheduleAt would cut them to the
	// second and have the timer come early.
	m.Header.Set(jetstream.ScheduleHeader, "@at "+time.UnixMilli(tm.FireAt).UTC().Format(time.RFC3339Nano))
	m.Header.Set(jetstream.ScheduleTargetHeader, bus.TimerSubject(tm.PlanID))
	m.Header.Set(jetstream.MsgIDHeader, tm.MsgID())
	return m
}

// purgeTimers is the JetStream API request that purges the timers stream.
const purgeTimers = "$JS.API.STREAM.PURGE." + bus.StreamTimers

// unschedule purges the timeout schedule of plan planID, which has ended.
// The answer comes to d.purged, which logs a failure.
func (d *Dispatcher) unschedule(planID string) {
	req, _ := json.Marshal(struct {
		Filter string `json:"filter"`
	}{bus.TimeoutScheduleSubject(planID)})
	_ = d.conn.NC.PublishRequest(purgeTimers, d.purged.Subject, req)
}

// subscribePurged subscribes to the answers of unschedule's purges.
func (d *Dispatcher) subscribePurged() (*nats.Subscription, error) {
	return d.conn.NC.Subscribe(d.conn.NC.NewInbox(), func(m *nats.Msg) {
		var resp struct {
			Error *jetstream.APIError `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &resp); err == nil && resp.Error != nil {
			d.log.Debug().Err(resp.Error).Msg("cannot purge an ended plan's timeout schedule; it fires as a no-op")
		}
	})
}
