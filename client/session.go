package client

import (
	"context"
	"encoding/json"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
)

// Skills lists the skills workers advertise, by name, with their health in
// a session ("" for the default session).
func (c *Client) Skills(ctx context.Context, sessionID string) (*planbus.SkillsReply, error) {
	var body []byte
	if sessionID != "" {
		body, _ = json.Marshal(map[string]string{"sessionId": sessionID})
	}
	var reply planbus.SkillsReply
	if err := c.call(ctx, bus.SubjectSkills, body, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}

// ResetSession restarts a session: every skill in it healthy again, a
// permanently failed one included (the only way to use it again in that
// session). With clearState the session's state document is deleted too.
// A session id that is not valid is a *RejectedError.
func (c *Client) ResetSession(ctx context.Context, sessionID string, clearState bool) (*planbus.SessionReset, error) {
	body, _ := json.Marshal(planbus.SessionResetRequest{SessionID: sessionID, State: clearState})
	var reply planbus.SessionReset
	if err := c.call(ctx, bus.SubjectSessionReset, body, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}
