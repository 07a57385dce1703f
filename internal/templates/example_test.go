package templates_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/planbus/planbus/internal/templates"
)

const library = `{
  "version": "1",
  "plans": [{
    "id": "greet",
    "name": "Greet someone",
    "domains": ["chat"],
    "triggers": ["say hello", "greet*"],
    "triggerThreshold": 1,
    "captures": ["(?i)\\b(?:to|greet)\\s+(?P<who>[A-Z][a-z]+)"],
    "vars": {"who": {"default": "World", "pattern": "[A-Za-z]{1,40}"}},
    "steps": [
      {"id": "hello", "name": "Say hello to {who}", "skill": "echo",
       "input": {"text": "Hello, {who}!"},
       "verify": {"type": "contains", "path": "/text", "value": "{who}"},
       "onFail": {"retries": 1, "then": "abort"}},
      {"id": "note", "name": "Remember it", "skill": "remember",
       "input": {"greeted": {"$ref": "hello#/text"}},
       "onFail": "skip"}
    ]
  }]
}`

func Example() {
	lib, err := templates.Decode([]byte(library))
	if err != nil {
		panic(err)
	}

	// The planner: match the request, instantiate, make a plan.
	in, err := templates.Select(lib, templates.Selection{Domain: "chat", Text: "please say hello to Ada"})
	if err != nil {
		panic(err)
	}
	fmt.Println("template:", in.Template.ID, "score:", in.Match.Score, "who:", in.Vars["who"])
	p, err := in.Plan()
	if err != nil {
		panic(err)
	}
	for _, t := range p.Tools {
		fmt.Printf("tool %s %s %s deps=%v required=%v attempts=%d\n", t.ToolID, t.Skill, t.Input, t.Dependencies, t.Required, t.RetryPolicy.MaxAttempts)
	}

	// The execution engine checks each result against the tool's gate;
	// the planner reads what follows a failure in the tool's metadata.
	fmt.Println(p.Tools[0].Verify.Check(json.RawMessage(`{"text":"Hello, Ada!"}`)))
	fmt.Println(p.Tools[0].Verify.Check(json.RawMessage(`{"text":"Hello!"}`)))
	meta, _ := templates.ParseToolMeta(p.Tools[0].Metadata)
	fmt.Println(meta.OnFail.Resolve(1, true).Action, meta.OnFail.Resolve(2, true).Action)
	// Output:
	// template: greet score: 2 who: Ada
	// tool hello echo {"text":"Hello, Ada!"} deps=[] required=true attempts=2
	// tool note remember {"greeted":{"$ref":"hello#/text"}} deps=[hello] required=false attempts=1
	// true /text contains "Ada"
	// false /text does not contain "Ada"
	// retry abort
}

func ExampleTracker() {
	lib, _ := templates.Decode([]byte(library))
	tmpl, _ := lib.Template("greet")
	in, _ := templates.Instantiate(tmpl, map[string]string{"who": "Ada"})
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tr := templates.NewTracker(in, start)

	d, _ := tr.Observe(templates.Result{Step: "hello", Succeeded: true, Output: json.RawMessage(`{"text":"Hello, Ada!"}`), At: start.Add(time.Second)})
	fmt.Println(d.Action, "-", d.Reason)
	fmt.Println(tr.Summary())
	stale, _ := tr.Stale(start.Add(time.Hour)) // no turns without progress, no age limit
	fmt.Println("stale:", stale)
	// Output:
	// advance - step "hello" verified: /text contains "Ada"
	// Plan greet v1 "Greet someone": 1/2 done
	// Step 1/2: Say hello to Ada ✓ verified (/text contains "Ada")
	// Step 2/2: Remember it → next
	//   Skill: remember {"greeted":{"$ref":"hello#/text"}}
	// Next: Step 2/2 (note). Do not skip ahead: each step is verified before the next.
	// stale: false
}

func ExampleMatch() {
	lib, _ := templates.Decode([]byte(library))
	for _, text := range []string{"Greetings to Grace", "What's the weather like?"} {
		cands := templates.Match(lib, templates.MatchInput{Domain: "chat", Text: text})
		fmt.Printf("%q: %d candidates", text, len(cands))
		for _, c := range cands {
			fmt.Printf(" %s (score %d, hits %q, who %s)", c.Template.ID, c.Score, c.Hits, c.Vars["who"])
		}
		fmt.Println()
	}
	// Output:
	// "Greetings to Grace": 1 candidates greet (score 2, hits ["greet*"], who Grace)
	// "What's the weather like?": 0 candidates
}
