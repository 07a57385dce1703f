package goap

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestToPlan(t *testing.T) {
	d, r := cabinPlan(t)
	p, err := ToPlan(r)
	if err != nil {
		t.Fatal(err)
	}
	type tool struct{ ID, Skill, Deps, Input string }
	var got []tool
	for _, tl := range p.Tools {
		deps, _ := json.Marshal(tl.Dependencies)
		got = append(got, tool{tl.ToolID, tl.Skill, string(deps), string(tl.Input)})
	}
	want := []tool{
		{"1-take-axe", "fetch", `[]`, `{"from":"shed","item":"axe"}`},
		{"2-chop", "chop", `["1-take-axe"]`, `{"note":"felling oak #0","tree":"oak"}`},
		{"3-chop", "chop", `["2-chop"]`, `{"note":"felling oak #2","tree":"oak"}`},
		{"4-chop", "chop", `["3-chop"]`, `{"note":"felling oak #4","tree":"oak"}`},
		{"5-build-cabin", "build", `["4-chop"]`, `{"logs":6,"structure":"cabin"}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if p.Graph() == nil {
		t.Error("plan was not checked (no graph)")
	}
	var meta struct {
		Goap Metadata `json:"goap"`
	}
	if err := json.Unmarshal(p.Metadata, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Goap.Domain != d.Name || meta.Goap.Goal != "build-cabin" || meta.Goap.Cost != 12 || len(meta.Goap.Steps) != 5 {
		t.Errorf("metadata %+v", meta.Goap)
	}
	if s := meta.Goap.Steps[4]; s.Tool != "5-build-cabin" || s.Cost != 5 || s.State["cabin"] != true {
		t.Errorf("last step metadata %+v", s)
	}
	if meta.Goap.Start["axe_in_shed"] != true {
		t.Errorf("start %v", meta.Goap.Start)
	}
}

func TestToPlanEmpty(t *testing.T) {
	d := loadExample(t, "woodcutter")
	r, err := Plan(context.Background(), d, State{"cabin": true}, "build-cabin", Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ToPlan(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Tools) != 0 {
		t.Errorf("got %d tools for a goal that holds, want 0", len(p.Tools))
	}
}

func TestToPlanRejectsBadResults(t *testing.T) {
	r := &Result{Domain: "d", Goal: "g", Steps: []Step{{Action: "a b", Skill: "a b"}}}
	if _, err := ToPlan(r); err == nil {
		t.Error("ToPlan accepted a step whose skill is not a valid name")
	}
}
