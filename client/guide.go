package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/schemas"
)

// Guide plays one turn of a guided session (planbus.guide.turn): an agent
// that runs its tools itself calls it once per turn with the user's
// message, its domain and the outputs of the tools it ran since the last
// turn. The reply says what the turn did to the session's plan
// (Transition), where the plan stands, and the Context to put before the
// model. A turn that breaks the schema is refused here, one the planner
// refuses comes back as a *RejectedError.
func (c *Client) Guide(ctx context.Context, turn planbus.GuideTurn) (*planbus.GuideReply, error) {
	body, err := json.Marshal(turn)
	if err != nil {
		return nil, fmt.Errorf("client: guide: %w", err)
	}
	if err := schemas.Validate(schemas.GuideTurn, body); err != nil {
		return nil, fmt.Errorf("client: guide: %w", err)
	}
	var reply planbus.GuideReply
	if err := c.call(ctx, bus.SubjectGuideTurn, body, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}
