// Package generator makes the plans of plan requests, one Generator per
// request kind: Fixed (kind plan), External (an external planner asked
// over NATS), HTN (internal/htn), GOAP (internal/goap, its domains
// decoded once) and Template (internal/templates). A Generator is given
// an Input for one attempt and answers a plan or an *Error, whose
// category says whether another attempt may do better.
//
// Generations run within budgets: memory and nodes (Limits, worked out
// by the planner from its maxima and the request's own request.Budget),
// GenerationTimeout, and a Gate that bounds how many run at once in a
// process and the memory they hold together. Running out of one is a
// permanent failure with a code naming it (planbus.CodeHTNMemoryBudget
// and the others, TimeBudgetCode). The generators do no I/O but External's question and the
// reading of domain files.
package generator
