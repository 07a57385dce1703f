package goap

import (
	"context"
	"os"
	"testing"
)

func TestSmoke(t *testing.T) {
	for _, f := range []string{"woodcutter", "release"} {
		doc, _ := os.ReadFile("../../examples/goap/" + f + ".json")
		d, err := Decode(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range d.Goals {
			r, err := Plan(context.Background(), d, State{}, g.Name, Options{})
			if err != nil {
				t.Log(g.Name, err)
				continue
			}
			t.Log(g.Name, r.Cost, r.Stats)
			for _, s := range r.Steps {
				t.Log("  ", s.Action, s.Cost, string(s.Input), s.State)
			}
		}
	}
}
