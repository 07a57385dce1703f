package dispatcher

import (
	"fmt"

	"github.com/nats-io/nats.go/micro"

	"github.com/planbus/planbus/internal/bus"
)

// addService registers the dispatcher with NATS micro: `nats micro stats
// planbus-dispatcher` shows its counters, and planbus.dispatcher.status
// answers with them.
func (d *Dispatcher) addService() (micro.Service, error) {
	svc, err := micro.AddService(d.conn.NC, micro.Config{
		Name:         bus.ServiceDispatcher,
		Version:      d.cfg.Version,
		Description:  "planbus dispatcher: runs plans as DAGs of tool calls",
		Metadata:     map[string]string{"dispatcher": d.cfg.ID},
		StatsHandler: func(*micro.Endpoint) any { return d.Stats() },
	})
	if err != nil {
		return nil, fmt.Errorf("dispatcher: micro service: %w", err)
	}
	err = svc.AddEndpoint("status", micro.HandlerFunc(func(r micro.Request) { _ = r.RespondJSON(d.Stats()) }),
		micro.WithEndpointSubject(bus.SubjectDispatcherStatus))
	if err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("dispatcher: status endpoint: %w", err)
	}
	err = svc.AddEndpoint("settled", micro.HandlerFunc(d.onSettled), micro.WithEndpointSubject(bus.SubjectCallSettled))
	if err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("dispatcher: settled endpoint: %w", err)
	}
	return svc, nil
}

// Stats are the dispatcher's counters since it started. results_rejected
// counts results dropped unapplied: invalid, published on another plan's
// subject, or without their call's token (forged, or from a worker that
// does not echo it). messagesDropped counts messages given up at their
// delivery limit (Config.DeliveryLimit) and invalid timers.
// resultsReadBack counts results read back from the results stream to
// rebuild a plan's state. partitionsOwned is how many partitions of the
// plans' messages this dispatcher consumes, dispatchersSeen how many
// dispatchers answered its last ping (itself included). callsSettled
// counts the calls delivered again that it told a worker not to run
// again (their attempt had ended).
func (d *Dispatcher) Stats() map[string]int64 {
	d.parts.mu.Lock()
	owned, seen := len(d.parts.owned), d.parts.seen
	d.parts.mu.Unlock()
	return map[string]int64{
		"partitionsOwned": int64(owned), "dispatchersSeen": int64(seen),
		"plansStarted": d.stats.PlansStarted.Load(), "plansRejected": d.stats.PlansRejected.Load(),
		"plansEnded": d.stats.PlansEnded.Load(), "results": d.stats.Results.Load(), "timers": d.stats.Timers.Load(),
		"toolsReleased": d.stats.Released.Load(), "casConflicts": d.stats.Conflicts.Load(), "batches": d.stats.Batches.Load(), "resultsReadBack": d.stats.ReadBack.Load(),
		"results_rejected":   d.stats.ResultsRejected.Load(),
		"messagesDropped":    d.stats.Dropped.Load(),
		"callsSettled":       d.stats.SettledAnswered.Load(),
		"plansWaitedToStart": d.stats.IntakeWaits.Load(),
	}
}
