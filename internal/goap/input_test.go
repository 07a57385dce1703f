package goap_test

import (
	"errors"
	"testing"

	"github.com/planbus/planbus/internal/goap"
)

func TestInputRendersTheGivenState(t *testing.T) {
	d, err := goap.Decode([]byte(`{
		"name": "pay", "facts": {"coins": 5, "who": {"type": "string"}},
		"actions": [{"name": "pay", "input": {"amount": "{coins}", "note": "{who} pays {coins}", "fixed": 1},
			"effects": {"coins": 0}}],
		"goals": [{"name": "broke", "conditions": {"coins": 0}}]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		state goap.State
		want  string
	}{
		{goap.State{}, `{"amount":5,"fixed":1,"note":" pays 5"}`},
		{goap.State{"coins": 7, "who": "ann", "other": true}, `{"amount":7,"fixed":1,"note":"ann pays 7"}`},
	} {
		got, err := d.Input("pay", tc.state)
		if err != nil || string(got) != tc.want {
			t.Errorf("Input(pay, %v) = %s, %v; want %s", tc.state, got, err, tc.want)
		}
	}
	if _, err := d.Input("steal", goap.State{}); err == nil {
		t.Error("an unknown action was rendered")
	}
	if _, err := d.Input("pay", goap.State{"coins": "many"}); !errors.Is(err, goap.ErrInvalidState) {
		t.Errorf("a mistyped fact: %v, want ErrInvalidState", err)
	}
}
