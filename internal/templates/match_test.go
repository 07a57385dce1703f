package templates

import (
	"errors"
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
			"bugfix_workflow", 3 + DomainBonus, []string{"fix a bug"}, nil, nil},
		{"plan activation without a domain", MatchInput{Text: "I need to fix a bug in the login module"},
			"bugfix_workflow", 3, []string{"fix a bug"}, nil, nil},
		{"no false trigger", MatchInput{Domain: "conversational", Text: "What's the weather like?"}, "", 0, nil, nil, nil},
		{"branch with captures", MatchInput{Domain: "git_ops", Text: "Create a new feature branch called feature/login from develop"},
			"git_feature_branch", 2 + DomainBonus, []string{"feature branch"}, map[string]string{"branch": "feature/login", "base": "develop"}, nil},
		{"punctuation and case", MatchInput{Text: "FEATURE-BRANCH, please"}, "git_feature_branch", 2, []string{"feature branch"}, nil, nil},
		{"prefix trigger", MatchInput{Text: "I am debugging TestLogin in ./internal/auth"}, "bugfix_workflow", 1, []string{"debug*"},
			map[string]string{"test": "TestLogin", "pkg": "./internal/auth"}, nil},
		{"merge", MatchInput{Text: "merge feature/login into develop"}, "git_merge_pr", 2, []string{"merge feature"},
			map[string]string{"branch": "feature/login", "target": "develop"}, nil},
		{"domain filters out", MatchInput{Domain: "docker_ops", Text: "create a new branch"}, "", 0, nil, nil, nil},
		{"domain any case", MatchInput{Domain: "GIT_OPS", Text: "create a new branch"}, "git_feature_branch", 2 + DomainBonus, []string{"new branch"}, nil, nil},
		{"logs", MatchInput{Domain: "log_analysis", Text: "Check the logs of nginx since yesterday"}, "log_investigation", 3 + DomainBonus,
			[]string{"check the logs"}, map[string]string{"unit": "nginx", "since": "yesterday"}, nil},
		{"backup", MatchInput{Text: "back up data to archive/2024"}, "file_backup_restore", 2, []string{"back up"},
			map[string]string{"source": "data", "dest": "archive/2024"}, nil},
		{"several candidates, best first", MatchInput{Text: "investigate why the docker build is broken"}, "docker_build_deploy", 2, []string{"docker build"}, nil,
			[]string{"bugfix_workflow", "log_investigation"}},
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
// contain a trigger, start nothing.
func TestMatchNoFalseTriggers(t *testing.T) {
	l := starter(t)
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
		if got := Match(l, MatchInput{Text: text}); len(got) > 0 {
			t.Errorf("%q matched %v (hits %q)", text, ids(got), got[0].Hits)
		}
	}
}

func TestMatchRanking(t *testing.T) {
	l := mustDecode(t, lib(
		`{"id":"first","name":"A","triggers":["deploy"],"steps":[{"id":"s","skill":"echo"}]}`,
		`{"id":"second","name":"B","triggers":["deploy"],"steps":[{"id":"s","skill":"echo"}]}`,
		`{"id":"phrase","name":"C","triggers":["deploy the app"],"steps":[{"id":"s","skill":"echo"}]}`,
		`{"id":"two_words","name":"D","triggers":["deploy","app"],"steps":[{"id":"s","skill":"echo"}]}`,
		`{"id":"strict","name":"E","triggers":["deploy","release","ship"],"triggerThreshold":2,"steps":[{"id":"s","skill":"echo"}]}`,
		`{"id":"domain","name":"F","domains":["ops"],"triggers":["deploy"],"steps":[{"id":"s","skill":"echo"}]}`,
		`{"id":"unkeyed","name":"G","steps":[{"id":"s","skill":"echo"}]}`,
	))
	tests := []struct {
		in   MatchInput
		want []string
	}{
		// Equal scores: more triggers first, then library order.
		{MatchInput{Text: "deploy the app"}, []string{"phrase", "two_words", "first", "second", "domain"}},
		{MatchInput{Text: "deploy"}, []string{"first", "second", "two_words", "domain"}},
		{MatchInput{Text: "deploy and ship it"}, []string{"strict", "first", "second", "two_words", "domain"}},
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
	if c, ok := Best(l, MatchInput{Text: "deploy the app"}, 3); !ok || c.Template.ID != "phrase" {
		t.Errorf("Best(min 3) = %v, %v", c.Template, ok)
	}
	if _, ok := Best(l, MatchInput{Text: "deploy the app"}, 4); ok {
		t.Error("Best(min 4) found a match scoring 3")
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
	if in.Template.ID != "git_feature_branch" || in.Match == nil || in.Match.Score != 4 {
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
		{Selection{Text: "create a new branch"}, ErrVars, `templates: bad variables: template "git_feature_branch": variable "branch" is required (the branch to create, e.g. feature/login); give it in the request's vars or in the text`},
		{Selection{Text: "create a new branch", Vars: map[string]string{"branch": "--force"}}, ErrVars, `variable "branch": "--force" does not match the pattern [A-Za-z0-9][A-Za-z0-9._/-]{0,99}`},
		{Selection{Text: "create a new branch", MinScore: 5}, ErrNoMatch, "nothing in the library matches"},
	}
	for _, tt := range tests {
		_, err := Select(l, tt.sel)
		if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Select(%+v) = %v; want %v containing %q", tt.sel, err, tt.is, tt.want)
		}
	}
}
