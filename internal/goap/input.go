package goap

import (
	"encoding/json"
	"fmt"
)

// Input returns the input of the named action with its {fact} templates
// expanded in state s, as Plan expands a step's input in the state the
// step starts from. A caller that runs a plan step by step renders each
// step's input from the state observed when the step is released, not
// the one predicted when the plan was made. Errors: an unknown action,
// ErrInvalidState for a mistyped fact.
func (d *Domain) Input(action string, s State) (json.RawMessage, error) {
	a := d.actions[action]
	if a == nil {
		return nil, fmt.Errorf("goap: unknown action %q", action)
	}
	v, err := d.vector(s)
	if err != nil {
		return nil, err
	}
	return a.render(d, v), nil
}
