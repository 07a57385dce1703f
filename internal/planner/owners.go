package planner

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
)

// What a named client (planner auth add-client NAME) makes is its own. It
// calls the endpoints on its own subjects, planbus.client.<name>.<...>,
// which only it (and admins) may publish on, so the caller is known from
// the subject alone (bus.OwnerOfSubject); the planner records the owner
// of each request it accepts from a named client, and of each session a
// named client uses first, in the requests bucket (owner.request.<id>,
// owner.session.<id>: a request id and a session id have no dot), with
// create-once, and refuses another caller's cancel, approval, reset,
// guided turn, agent stop, or request in the session: FORBIDDEN. What the
// shared client role (and every client without authorization) makes has
// no owner, as before. The default session is everyone's and is never
// owned.

// ownerHeader carries the owner of an accepted request in the requests
// stream, which only planners write.
const ownerHeader = "Planbus-Owner"

func requestOwnerKey(id string) string  { return "owner.request." + id }
func sessionOwnerKey(sid string) string { return "owner.session." + sid }

// forbiddenError: the caller may not act on what another client owns.
type forbiddenError struct {
	field, what, owner, caller string
}

func (e *forbiddenError) Error() string {
	who := "the shared client role"
	if e.caller != "" {
		who = "client " + e.caller
	}
	return fmt.Sprintf("%s belongs to client %s: %s may not act on it (ask as %s, or as an admin on planbus.client.%s.>)", e.what, e.owner, who, e.owner, e.owner)
}

// ownerOf reads the owner recorded under key, "" for none.
func (s *Service) ownerOf(ctx context.Context, key string) (string, error) {
	// "No owner" lets anyone act: it is the leader's word, not that of
	// a replica just back from a partition, which may not have the
	// claim yet.
	v, _, err := bus.KVReadSure(s.conn.NC, s.requests)(ctx, key)
	if err != nil {
		return "", fmt.Errorf("%w: owners: %v", errStoreUnavailable, err)
	}
	return string(v), nil
}

// mayAct refuses caller what key names unless it is caller's or no one's;
// what and field say what it is, for the refusal.
func (s *Service) mayAct(ctx context.Context, caller, key, what, field string) error {
	owner, err := s.ownerOf(ctx, key)
	if err != nil || owner == "" || owner == caller {
		return err
	}
	return &forbiddenError{field: field, what: what, owner: owner, caller: caller}
}

// claim records caller as the owner of what key names, unless it has one:
// then it must be caller. The shared client role claims nothing, and may
// use only what no one owns.
func (s *Service) claim(ctx context.Context, caller, key, what, field string) error {
	if caller == "" {
		return s.mayAct(ctx, caller, key, what, field)
	}
	if _, err := s.requests.Create(ctx, key, []byte(caller)); err == nil {
		return nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("%w: owners: %v", errStoreUnavailable, err)
	}
	return s.mayAct(ctx, caller, key, what, field)
}

// claimSession is claim for a session; the default session is everyone's.
func (s *Service) claimSession(ctx context.Context, caller, sid string) error {
	if sid == "" || sid == planbus.DefaultSession {
		return nil
	}
	return s.claim(ctx, caller, sessionOwnerKey(sid), "session "+sid, "/sessionId")
}

// maySession is mayAct for a session.
func (s *Service) maySession(ctx context.Context, caller, sid string) error {
	if sid == "" || sid == planbus.DefaultSession {
		return nil
	}
	return s.mayAct(ctx, caller, sessionOwnerKey(sid), "session "+sid, "/sessionId")
}

// mayRequest is mayAct for a request.
func (s *Service) mayRequest(ctx context.Context, caller, requestID, field string) error {
	return s.mayAct(ctx, caller, requestOwnerKey(requestID), "request "+requestID, field)
}

// mayPlan is mayAct for the request a plan belongs to: its state's, or the
// id a planner gives its plans (<requestId>-<attempt>, an agent's
// <agentId>-a<n>).
func (s *Service) mayPlan(ctx context.Context, caller, planID string) error {
	ids := []string{planID}
	if st, err := s.planState(ctx, planID); err == nil && st != nil && st.RequestID != "" {
		ids = append(ids, st.RequestID)
	}
	if i := strings.LastIndexByte(planID, '-'); i > 0 {
		ids = append(ids, planID[:i])
	}
	for _, id := range ids {
		if err := s.mayRequest(ctx, caller, id, "/planId"); err != nil {
			return err
		}
	}
	return nil
}

// caller is the named client a request to an endpoint comes from, "" for
// the shared client role (or no authorization).
func caller(subject string) string { return bus.OwnerOfSubject(subject) }
