package schemas

// The schemas of planbus.guide.turn, the planner's endpoint for guided
// sessions.
const (
	GuideTurn  = "guide-turn.schema.json"
	GuideReply = "guide-reply.schema.json"
)
