package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/schemas"
)

// An Inspector reads what a planbus system holds and manages its
// sessions, apart from running work (Client): the requests accepted
// (List), the skills workers advertise with their health in a session
// (Skills), and a session's reset (ResetSession). It works within the
// client role's permissions and is safe for concurrent use.
type Inspector struct{ c *Client }

// NewInspector returns an Inspector on nc, with the Client options that
// apply to it (WithRequestTimeout, WithLogger, As).
func NewInspector(nc *nats.Conn, opts ...Option) (*Inspector, error) {
	c, err := New(nc, opts...)
	if err != nil {
		return nil, err
	}
	return c.Inspector(), nil
}

// Inspector returns an Inspector that uses c's connection and options.
func (c *Client) Inspector() *Inspector { return &Inspector{c: c} }

// Skills lists the skills workers advertise, by name, with their health in
// a session ("" for the default session).
func (in *Inspector) Skills(ctx context.Context, sessionID string) (*planbus.SkillsReply, error) {
	var body []byte
	if sessionID != "" {
		body, _ = json.Marshal(map[string]string{"sessionId": sessionID})
	}
	var reply planbus.SkillsReply
	if err := in.c.call(ctx, bus.SubjectSkills, body, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}

// ResetSession restarts a session: every skill in it healthy again, a
// permanently failed one included (the only way to use it again in that
// session). With clearState the session's state document is deleted too.
// A session id that is not valid is a *RejectedError.
func (in *Inspector) ResetSession(ctx context.Context, sessionID string, clearState bool) (*planbus.SessionReset, error) {
	body, _ := json.Marshal(planbus.SessionResetRequest{SessionID: sessionID, State: clearState})
	var reply planbus.SessionReset
	if err := in.c.call(ctx, bus.SubjectSessionReset, body, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}

// List asks the planner for recent requests, the most recently accepted
// first (planbus.ListRequest: every field optional: filter by status and
// session, at most Limit). A query the list schema refuses is an error
// before anything is sent.
func (in *Inspector) List(ctx context.Context, q planbus.ListRequest) (*planbus.ListReply, error) {
	body, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	if err := schemas.Validate(schemas.ListRequest, body); err != nil {
		return nil, fmt.Errorf("client: list: %w", err)
	}
	var reply planbus.ListReply
	if err := in.c.call(ctx, bus.SubjectPlanList, body, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}
