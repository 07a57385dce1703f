package templates

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func ids(cs []Candidate) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.Template.ID)
	}
	return out
}

func TestMatchStarter(t *testing.T) {
	l := starter(t)
	tests := []struct {
		name   string
		in     MatchInput
		best   string // "" for no match
		score  int
		hits   []string
		vars   map[string]string // expected captures, input aside
		others []string          // further candidates, in order
	}{
		{"plan activation", MatchInput{Domain: "bugfix", Text: "I need to fix a bug in the login module"},
			"bugfix_workflow", 1 + DomainBonus, []string{"fix a bug"}, nil, nil},
		{"without a domain, no plan that lists domains", MatchInput{Text: "I need to fix a bug in the login module"}, "", 0, nil, nil, nil},
		{"no false trigger", MatchInput{Domain: "conversational", Text: "What's the weather like?"}, "", 0, nil, nil, nil},
		{"branch with captures", MatchInput{Domain: "git_ops", Text: "Create a new feature branch called feature/login from develop"},
			"git_feature_branch", 2 + DomainBonus, []string{"feature branch", "branch called"}, map[string]string{"branch": "feature/login", "base": "develop"}, nil},
		{"one trigger is not enough", MatchInput{Domain: "git_ops", Text: "create a feature branch"}, "", 0, nil, nil, nil},
		{"punctuation and case", MatchInput{Domain: "git_ops", Text: "FEATURE-BRANCH, NEW BRANCH please"}, "git_feature_branch", 2 + DomainBonus,
			[]string{"feature branch", "new branch"}, nil, nil},
		{"prefix trigger", MatchInput{Domain: "bugfix", Text: "I am debugging TestLogin in ./internal/auth"}, "bugfix_workflow", 1 + DomainBonus, []string{"debug*"},
			map[string]string{"test": "TestLogin", "pkg": "./internal/auth"}, nil},
		{"merge", MatchInput{Domain: "git_ops", Text: "merge feature/login into develop"}, "git_merge_pr", 2 + DomainBonus, []string{"merge feature", "merge"},
			map[string]string{"branch": "feature/login", "target": "develop"}, nil},
		{"domain filters out", MatchInput{Domain: "docker_ops", Text: "create a new branch called topic"}, "", 0, nil, nil, nil},
		{"domain any case", MatchInput{Domain: "GIT_OPS", Text: "create a new branch called topic"}, "git_feature_branch", 2 + DomainBonus,
			[]string{"new branch", "branch called"}, map[string]string{"branch": "topic"}, nil},
		{"logs", MatchInput{Domain: "log_analysis", Text: "Check the logs of nginx since yesterday"}, "log_investigation", 2 + DomainBonus,
			[]string{"check the logs", "logs"}, map[string]string{"unit": "nginx", "since": "yesterday"}, nil},
		{"backup", MatchInput{Domain: "file_ops", Text: "back up data to archive/2024"}, "file_backup_restore", 2 + DomainBonus, []string{"back up", "archive*"},
			map[string]string{"source": "data", "dest": "archive/2024"}, nil},
		{"a tie goes to the earlier plan", MatchInput{Domain: "git_ops", Text: "create a new branch called feature/login, then merge branch feature/login"},
			"git_feature_branch", 2 + DomainBonus, []string{"new branch", "branch called"}, map[string]string{"branch": "feature/login"},
			[]string{"git_merge_pr"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Match(l, tt.in)
			if tt.best == "" {
				if len(got) > 0 {
					t.Fatalf("got %v, want no match", ids(got))
				}
				return
			}
			if len(got) == 0 {
				t.Fatalf("no match, want %s", tt.best)
			}
			c := got[0]
			if c.Template.ID != tt.best || c.Score != tt.score || !cmp.Equal(c.Hits, tt.hits) {
				t.Errorf("best = %s score %d hits %q; want %s score %d hits %q", c.Template.ID, c.Score, c.Hits, tt.best, tt.score, tt.hits)
			}
			if c.Domain != (tt.in.Domain != "") {
				t.Errorf("Domain = %v", c.Domain)
			}
			want := map[string]string{InputVar: tt.in.Text}
			for k, v := range tt.vars {
				want[k] = v
			}
			if diff := cmp.Diff(want, c.Vars); diff != "" {
				t.Errorf("vars (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(append([]string{tt.best}, tt.others...), ids(got)); diff != "" {
				t.Errorf("candidates (-want +got):\n%s", diff)
			}
		})
	}
}

// No false triggers: everyday text, and words that only
// contain a trigger, start nothing, in any domain.
func TestMatchNoFalseTriggers(t *testing.T) {
	l := starter(t)
	domains := []string{""}
	for _, p := range l.Plans {
		domains = append(domains, p.Domains...)
	}
	for _, text := range []string{
		"What's the weather like?",
		"Tell me a joke about cats",
		"Can you prefix every line with a date?", // fix
		"The brokerage account is closed",        // broken
		"We investigated it last year",           // investigate (no '*')
		"Explain the merge sort algorithm",       // merge ...
		"List the endpoints' owners",             // endpoint
		"I like backups and scaffolding is fun",  // backup, scaffold
		"Our new branches open in May",           // new branch
		"the debut album",                        // debug*
		"",
		"   ",
		"🙂🙂🙂",
	} {
		for _, d := range domains {
			if got := Match(l, MatchInput{Domain: d, Text: text}); len(got) > 0 {
				t.Errorf("%q in %q matched %v (hits %q)", text, d, ids(got), got[0].Hits)
			}
		}
	}
}

func TestMatchRanking(t *testing.T) {
	l := mustDecode(t, lib(
		`{"id":"first","name":"A","triggers":["deploy"],"triggerThreshold":1,"steps":[{"id":"s","skill":"echo"}]}`,
		`{"id":"second","name":"B","triggers":["deploy"],"triggerThreshold":1,"steps":[{"id":"s","skill":"echo"}]}`,
		`{"id":"phrase","name":"C","triggers":["deploy the app"],"triggerThreshold":1,"steps":[{"id":"s","skill":"echo"}]}`,
		`{"id":"two_words","name":"D","triggers":["deploy","app"],"triggerThreshold":1,"steps":[{"id":"s","skill":"echo"}]}`,
		`{"id":"strict","name":"E","triggers":["deploy","release","ship"],"steps":[{"id":"s","skill":"echo"}]}`,
		`{"id":"domain","name":"F","domains":["ops"],"triggers":["deploy"],"triggerThreshold":1,"steps":[{"id":"s","skill":"echo"}]}`,
		`{"id":"unkeyed","name":"G","steps":[{"id":"s","skill":"echo"}]}`,
	))
	tests := []struct {
		in   MatchInput
		want []string
	}{
		// The score is the number of triggers matched, plus the domain
		// bonus; equal scores keep library order.
		{MatchInput{Text: "deploy the app"}, []string{"two_words", "first", "second", "phrase"}},
		{MatchInput{Text: "deploy"}, []string{"first", "second", "two_words"}},
		// strict needs two triggers (the default threshold).
		{MatchInput{Text: "deploy and ship it"}, []string{"strict", "first", "second", "two_words"}},
		// A plan that lists domains needs one of them: the bonus puts it
		// first; without a domain, or with another, it is out.
		{MatchInput{Domain: "ops", Text: "deploy"}, []string{"domain", "first", "second", "two_words"}},
		{MatchInput{Domain: "dev", Text: "deploy"}, []string{"first", "second", "two_words"}},
		{MatchInput{Text: "nothing here"}, []string{}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, ids(Match(l, tt.in))); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", tt.in, diff)
		}
	}
	// The same input always gives the same order.
	first := ids(Match(l, MatchInput{Text: "deploy the app"}))
	for range 20 {
		if got := ids(Match(l, MatchInput{Text: "deploy the app"})); !cmp.Equal(got, first) {
			t.Fatalf("order changed: %v then %v", first, got)
		}
	}
	if c, ok := Best(l, MatchInput{Text: "deploy the app"}, 2); !ok || c.Template.ID != "two_words" {
		t.Errorf("Best(min 2) = %v, %v", c.Template, ok)
	}
	if _, ok := Best(l, MatchInput{Text: "deploy the app"}, 3); ok {
		t.Error("Best(min 3) found a match scoring 2")
	}
	if _, ok := Best(l, MatchInput{Text: "zzz"}, 0); ok {
		t.Error("Best found a match without triggers")
	}
}

func TestWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"Fix the BUG!", []string{"fix", "the", "bug"}},
		{"feature/login-page v2.1", []string{"feature", "login", "page", "v2", "1"}},
		{"Échec du déploiement", []string{"échec", "du", "déploiement"}},
		{"  ", nil},
	}
	for _, tt := range tests {
		if got := words(tt.in); !cmp.Equal(got, tt.want) {
			t.Errorf("words(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := tokensKey(tokenizeTrigger("Debug* the  *app*, now")); got != "debug* the app* now" {
		t.Errorf("tokenizeTrigger = %q", got)
	}
}

func TestSelect(t *testing.T) {
	l := starter(t)
	in, err := Select(l, Selection{Domain: "git_ops", Text: "create a feature branch called feature/login", Vars: map[string]string{"base": "develop", "unused": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if in.Template.ID != "git_feature_branch" || in.Match == nil || in.Match.Score != 2+DomainBonus {
		t.Fatalf("selected %s, match %+v", in.Template.ID, in.Match)
	}
	want := map[string]string{"input": "create a feature branch called feature/login", "branch": "feature/login", "base": "develop",
		"remote": "origin", "message": "Work in progress"}
	if diff := cmp.Diff(want, in.Vars); diff != "" {
		t.Errorf("vars (-want +got):\n%s", diff)
	}
	if in.Steps[1].Name != "Create branch feature/login" || string(in.Steps[1].Input) != `{"argv":["git","switch","--create","feature/login","develop"]}` {
		t.Errorf("step 2: %q %s", in.Steps[1].Name, in.Steps[1].Input)
	}

	// Explicit vars win over captures; an explicit id needs no trigger.
	in, err = Select(l, Selection{Template: "git_merge_pr", Text: "merge feature/a into main", Vars: map[string]string{"branch": "feature/b"}})
	if err != nil {
		t.Fatal(err)
	}
	if in.Vars["branch"] != "feature/b" || in.Match != nil {
		t.Errorf("branch %q, match %+v", in.Vars["branch"], in.Match)
	}
	in, err = Select(l, Selection{Template: "codegen_module", Vars: map[string]string{"name": "billing", "input": "from vars"}})
	if err != nil || in.Vars["input"] != "from vars" {
		t.Errorf("input from vars: %v %v", in, err)
	}

	tests := []struct {
		sel  Selection
		is   error
		want string
	}{
		{Selection{Template: "nope"}, ErrUnknownTemplate, `templates: unknown template: no template "nope" in the library`},
		{Selection{Text: "What's the weather like?", Domain: "chat"}, ErrNoMatch, `templates: no template matches: nothing in the library matches "What's the weather like?" in domain "chat"`},
		{Selection{Text: "create a new branch for the feature branch work"}, ErrNoMatch, `nothing in the library matches "create a new branch for the feature branch work"`},
		{Selection{Domain: "git_ops", Text: "create a new branch for the feature branch work"}, ErrVars, `templates: bad variables: template "git_feature_branch": variable "branch" is required (the branch to create, e.g. feature/login); give it in the request's vars or in the text`},
		{Selection{Domain: "git_ops", Text: "create a new branch for the feature branch work", Vars: map[string]string{"branch": "--force"}}, ErrVars, `variable "branch": "--force" does not match the pattern [A-Za-z0-9][A-Za-z0-9._/-]{0,99}`},
		{Selection{Domain: "git_ops", Text: "create a new branch for the feature branch work", MinScore: 4}, ErrNoMatch, "nothing in the library matches"},
	}
	for _, tt := range tests {
		_, err := Select(l, tt.sel)
		if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Select(%+v) = %v; want %v containing %q", tt.sel, err, tt.is, tt.want)
		}
	}
}

// The README's template demo, examples/requests/template.json, matches
// the plan it means to run.
func TestExampleRequestMatches(t *testing.T) {
	doc, err := os.ReadFile("../../examples/requests/template.json")
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Input    string `json:"input"`
		Template struct {
			Domain string `json:"domain"`
		} `json:"template"`
	}
	if err := json.Unmarshal(doc, &req); err != nil {
		t.Fatal(err)
	}
	in, err := Select(starter(t), Selection{Domain: req.Template.Domain, Text: req.Input})
	if err != nil || in.Template.ID != "codegen_module" || in.Vars["name"] != "greeter" {
		t.Errorf("selected %v, %v", in, err)
	}
}
