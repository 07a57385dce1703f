package dispatcher_test

import (
	"testing"
	"time"

	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
)

// A skill's name may have a namespace, NAME.TOOL (an MCP server's tool
// served as a skill is one): its calls go on planbus.tools.NAME.TOOL, its
// consumer and micro endpoint are named without the dot, and a plan of
// such skills runs as any other.
func TestNamespacedSkillsRun(t *testing.T) {
	echo := skills.Echo()
	a, b := echo, echo
	a.Manifest.Name, b.Manifest.Name = "demo.echo", "demo_echo"
	h := start(t, opts{extra: []skill.Skill{a, b}})
	r, _ := h.run(`{"planId":"ns","tools":[
		{"toolId":"x","skill":"demo.echo","input":{"v":1}},
		{"toolId":"y","skill":"demo_echo","dependencies":["x"],"input":{"w":{"$ref":"x#/v"}}}]}`, time.Minute)
	if !r.Success {
		t.Fatalf("result %+v", r)
	}
	for _, o := range r.Tools {
		if o.WorkerID == "" || string(o.Output) == "" {
			t.Errorf("tool %s: %+v", o.ToolID, o)
		}
	}
}
