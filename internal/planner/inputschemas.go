package planner

import (
	"sync"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/schemas"
)

// inputSchemas keeps the skills' input schemas compiled, by skill, as long
// as the manifest's schema stays the same: compiling one for every plan
// request would cost more than checking the inputs.
type inputSchemas struct {
	mu sync.Mutex
	m  map[string]compiledSchema
}

type compiledSchema struct {
	raw string
	v   *schemas.Validator
	err error
}

// maxCachedSchemas bounds the cache; past it, it starts again.
const maxCachedSchemas = 1024

func (c *inputSchemas) get(m planbus.SkillManifest) (*schemas.Validator, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs, ok := c.m[m.Name]; ok && cs.raw == string(m.InputSchema) {
		return cs.v, cs.err
	}
	if c.m == nil || len(c.m) >= maxCachedSchemas {
		c.m = map[string]compiledSchema{}
	}
	v, err := schemas.Compile("skill-"+m.Name+"-input", m.InputSchema)
	c.m[m.Name] = compiledSchema{raw: string(m.InputSchema), v: v, err: err}
	return v, err
}
