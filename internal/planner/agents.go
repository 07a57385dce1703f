package planner

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/generator"
	"github.com/planbus/planbus/internal/request"
)

// agentHost is the planner as its agents see it (agent.Host): the
// agents' searches take the slots of agentGate, their cancels and
// outcomes go the way of the replan loop's.
type agentHost struct{ s *Service }

func (h agentHost) Lock(key string) func() { return h.s.lock(key) }

func (h agentHost) Skills(ctx context.Context) (map[string]planbus.SkillManifest, error) {
	return h.s.skillManifests(ctx)
}

func (h agentHost) Usable(sessionID, skill string) bool {
	return h.s.health.Get(sessionID, skill).Usable()
}

func (h agentHost) EnterSearch(ctx context.Context, r *request.Request) (generator.Limits, func(), error) {
	lim := h.s.cfg.limitsFor(r)
	release, err := h.s.enter(ctx, h.s.agentGate, lim)
	return lim, release, err
}

func (h agentHost) CancelPlan(ctx context.Context, planID, reason string) error {
	return h.s.publishCancel(ctx, planID, &cancelMark{Reason: reason, At: time.Now().UTC()})
}

func (h agentHost) PublishOutcome(ctx context.Context, o *planbus.Outcome) error {
	return h.s.publishOutcome(ctx, o)
}

func (h agentHost) Drop(m jetstream.Msg, why string, cause error) { h.s.drop(m, why, cause) }

func (h agentHost) MaySession(ctx context.Context, caller, sessionID string) error {
	return h.s.maySession(ctx, caller, sessionID)
}

func (h agentHost) Reject(req micro.Request, err error) { rejectErr(req, err) }
