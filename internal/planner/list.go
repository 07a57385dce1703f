package planner

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/request"
)

// Listing (planbus.plan.list). Clients may not list a bucket's keys (that
// takes a consumer), so the planner lists for them: it reads the REQUESTS
// stream backwards from its last message, one accepted request a message
// in the order they were accepted, and looks up each one's loop state.

// maxListScan bounds the accepted requests one list looks at, so a
// filter that matches nothing costs a bounded number of reads.
const maxListScan = 10000

func (s *Service) handleList(req micro.Request) {
	q, err := request.DecodeList(req.Data())
	if err != nil {
		rejectErr(req, err)
		return
	}
	ctx, cancel := context.WithTimeout(s.stopping, endpointTimeout)
	defer cancel()
	reply, err := s.list(ctx, q)
	if err != nil {
		s.log.Warn().Err(err).Msg("cannot list requests")
		request.RejectCode(req, planbus.CodeUnavailable, "", err.Error())
		return
	}
	_ = req.RespondJSON(reply)
}

// listedLoop is what a list reads of a loop state.
type listedLoop struct {
	Status  planbus.RequestStatus `json:"status"`
	Attempt int                   `json:"attempt"`
	PlanID  string                `json:"planId"`
	Cancel  *cancelMark           `json:"cancel"`
	Outcome *struct {
		Status   planbus.RequestStatus `json:"status"`
		Attempts int                   `json:"attempts"`
	} `json:"outcome"`
	Updated time.Time `json:"updatedAt"`
}

// mentions tells whether a request's id, or a description, goal or input
// text of it (at its top or one level down: a plan's description, an llm
// request's goal), contains text, which is in lower case.
func mentions(doc []byte, id, text string) bool {
	if strings.Contains(strings.ToLower(id), text) {
		return true
	}
	var top map[string]any
	if json.Unmarshal(doc, &top) != nil {
		return false
	}
	var look func(m map[string]any, depth int) bool
	look = func(m map[string]any, depth int) bool {
		for k, v := range m {
			switch v := v.(type) {
			case string:
				if (k == "description" || k == "goal" || k == "input") && strings.Contains(strings.ToLower(v), text) {
					return true
				}
			case map[string]any:
				if depth == 0 && look(v, 1) {
					return true
				}
			}
		}
		return false
	}
	return look(top, 0)
}

// list answers q, the most recently accepted requests first.
func (s *Service) list(ctx context.Context, q *planbus.ListRequest) (*planbus.ListReply, error) {
	info, err := s.accepted.Info(ctx)
	if err != nil {
		return nil, err
	}
	out := &planbus.ListReply{Requests: []planbus.RequestSummary{}}
	seen := map[string]bool{}
	seq, first := info.State.LastSeq, info.State.FirstSeq
	if q.Before > 0 && q.Before-1 < seq {
		seq = q.Before - 1
	}
	text := strings.ToLower(q.Text)
	for scanned := 0; seq >= first && seq > 0; seq, scanned = seq-1, scanned+1 {
		if scanned == maxListScan || len(out.Requests) == q.Limit {
			out.More, out.Next = true, seq+1
			break
		}
		m, err := s.accepted.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // expired or removed since Info
		}
		if err != nil {
			return nil, err
		}
		var r struct {
			RequestID string `json:"requestId"`
			SessionID string `json:"sessionId"`
			Kind      string `json:"kind"`
		}
		if !q.Since.IsZero() && m.Time.Before(q.Since) {
			break // accepted in order: the rest are older
		}
		if !q.Until.IsZero() && m.Time.After(q.Until) {
			continue
		}
		if json.Unmarshal(m.Data, &r) != nil || r.RequestID == "" || seen[r.RequestID] {
			continue
		}
		if (q.Kind != "" && r.Kind != q.Kind) || (text != "" && !mentions(m.Data, r.RequestID, text)) {
			continue
		}
		seen[r.RequestID] = true
		if r.SessionID == "" {
			r.SessionID = planbus.DefaultSession
		}
		if q.SessionID != "" && r.SessionID != q.SessionID {
			continue
		}
		sum := planbus.RequestSummary{RequestID: r.RequestID, SessionID: r.SessionID, Kind: r.Kind,
			Status: planbus.RequestQueued, AcceptedAt: m.Time.UTC()}
		e, err := s.requests.Get(ctx, r.RequestID)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return nil, err
		default:
			var l listedLoop
			if json.Unmarshal(e.Value(), &l) == nil {
				sum.Status, sum.Attempts, sum.PlanID, sum.UpdatedAt = l.Status, l.Attempt, l.PlanID, l.Updated
				switch {
				case l.Outcome != nil:
					sum.Status, sum.Attempts = l.Outcome.Status, l.Outcome.Attempts
				case l.Status == loopExecuting && l.Cancel != nil:
					sum.Status = planbus.RequestCancelling
				}
			}
		}
		if q.Status != "" && sum.Status != q.Status {
			continue
		}
		if sum.Status == planbus.RequestExecuting && sum.PlanID != "" {
			if sum.Waiting, err = s.waitingTools(ctx, sum.PlanID); err != nil {
				return nil, err
			}
		}
		if q.Waiting && len(sum.Waiting) == 0 {
			continue
		}
		out.Requests = append(out.Requests, sum)
	}
	return out, nil
}

// waitingTools are the tools of running plan planID that wait for
// approval. The plan's definition, which may be large, is read for their
// ids only when its state says one waits.
func (s *Service) waitingTools(ctx context.Context, planID string) ([]string, error) {
	st, _, err := execution.ReadStored(ctx, bus.StateKey(planID), bus.KVRead(s.plans))
	if err != nil || st == nil || st.Status != planbus.PlanRunning { // no state: the plan has not started
		return nil, err
	}
	if !slices.ContainsFunc(st.Tools, func(t execution.StoredTool) bool { return t.State == planbus.ToolWaitingApproval }) {
		return nil, nil
	}
	tools, err := s.planTools(ctx, planID)
	if err != nil {
		return nil, err
	}
	var ids []string
	for i := range min(len(tools), len(st.Tools)) {
		if st.Tools[i].State == planbus.ToolWaitingApproval {
			ids = append(ids, tools[i].ToolID)
		}
	}
	return ids, nil
}
