package worker

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/plan"
)

// addService registers the worker with NATS micro: `nats micro ls` lists
// it, `nats micro stats planbus-toolworker` shows per-skill call counts,
// and planbus.invoke.<skill> runs a skill directly (request/reply, outside
// any plan) for trying skills by hand.
func (w *Worker) addService() (micro.Service, error) {
	bySkill := map[string]*served{}
	for _, s := range w.skills {
		bySkill[s.skill.Manifest.Name] = s
	}
	svc, err := micro.AddService(w.nc, micro.Config{
		Name:        bus.ServiceToolworker,
		Version:     w.cfg.Version,
		Description: "planbus tool worker",
		Metadata:    map[string]string{"worker": w.cfg.ID},
		StatsHandler: func(e *micro.Endpoint) any {
			if s, ok := bySkill[e.Name]; ok {
				return s.stats.snapshot()
			}
			return nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("worker: micro service: %w", err)
	}
	for _, s := range w.skills {
		m := s.skill.Manifest
		// An endpoint's name has no dot: a namespaced skill's has "__".
		err := svc.AddEndpoint(strings.ReplaceAll(m.Name, ".", "__"), w.invokeHandler(s),
			micro.WithEndpointSubject(bus.InvokeSubject(m.Name)),
			micro.WithEndpointMetadata(map[string]string{"description": m.Description, "stream_subject": bus.ToolSubject(m.Name)}))
		if err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("worker: endpoint %s: %w", m.Name, err)
		}
	}
	return svc, nil
}

func (w *Worker) invokeHandler(s *served) micro.HandlerFunc {
	return func(req micro.Request) {
		input := req.Data()
		if len(input) == 0 {
			input = []byte("{}")
		}
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(input, &probe); err != nil {
			_ = req.Error("400", "input must be a JSON object: "+err.Error(), nil)
			return
		}
		timeout := s.skill.Manifest.TimeoutMs
		if timeout == 0 {
			timeout = plan.DefaultToolTimeoutMs
		}
		id := nuid.Next()
		tc := &planbus.ToolCall{PlanID: "invoke-" + id, RequestID: "invoke-" + id, ToolID: "invoke", Skill: s.skill.Manifest.Name,
			Attempt: 1, MaxAttempts: 1, Input: input, TimeoutMs: timeout, IdempotencyKey: "invoke-" + id + "/invoke/1", ReleasedAt: time.Now()}
		started := time.Now()
		out, err := s.handler.Handle(w.callCtx, skillCall(tc))
		_ = req.RespondJSON(w.result(tc, out, err, started))
	}
}
