// Package guide answers planbus.guide.turn for the planner: one turn of a
// guided session, played on the template library (templates.GuideTurn,
// pure) against the session's state in KV planbus-guides, stored with
// compare-and-set so that any planner answers any turn, then published as
// a guide.* event on the session's events and answered.
package guide
