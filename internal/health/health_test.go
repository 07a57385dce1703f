package health

import (
	"testing"

	"github.com/planbus/planbus"
)

func TestHealthTransitions(t *testing.T) {
	fail := func(cat planbus.Category, final bool) Outcome {
		return Outcome{Category: cat, Error: "x", Final: final}
	}
	ok := Outcome{Succeeded: true}
	retryOK := Outcome{Succeeded: true, Retry: true}
	tests := []struct {
		name  string
		from  Record
		steps []Outcome
		want  string
	}{
		{"healthy: timeout -> temporaryFailure", Record{State: Healthy}, []Outcome{fail("timeout", false)}, TemporaryFailure},
		{"healthy: network error -> temporaryFailure", Record{State: Healthy}, []Outcome{fail("network", false)}, TemporaryFailure},
		{"healthy: 2 failures stay healthy", Record{State: Healthy}, []Outcome{fail("internal", false), fail("internal", false)}, Healthy},
		{"healthy: 3 consecutive failures -> degraded", Record{State: Healthy},
			[]Outcome{fail("internal", false), fail("permanent", false), fail("internal", true)}, Degraded},
		{"healthy: a success in between resets the count", Record{State: Healthy},
			[]Outcome{fail("internal", false), fail("internal", false), ok, fail("internal", false)}, Healthy},
		{"degraded: success -> healthy", Record{State: Degraded}, []Outcome{ok}, Healthy},
		{"degraded: 3 more failures -> permanentFailure", Record{State: Degraded},
			[]Outcome{fail("internal", false), fail("timeout", false), fail("internal", false)}, PermanentFailure},
		{"degraded: 2 failures stay degraded", Record{State: Degraded}, []Outcome{fail("internal", false), fail("internal", false)}, Degraded},
		{"temporaryFailure: retry success -> healthy", Record{State: TemporaryFailure}, []Outcome{retryOK}, Healthy},
		{"temporaryFailure: max retries exceeded -> permanentFailure", Record{State: TemporaryFailure}, []Outcome{fail("network", true)}, PermanentFailure},
		{"temporaryFailure: a failure with retries left stays", Record{State: TemporaryFailure}, []Outcome{fail("network", false)}, TemporaryFailure},
		{"healthy: timeout on the last attempt -> permanentFailure", Record{State: Healthy}, []Outcome{fail("timeout", true)}, PermanentFailure},
		{"permanentFailure: stays on success", Record{State: PermanentFailure}, []Outcome{ok}, PermanentFailure},
		{"permanentFailure: stays on failure", Record{State: PermanentFailure}, []Outcome{fail("network", true)}, PermanentFailure},
		{"zero value is healthy", Record{}, []Outcome{fail("network", false)}, TemporaryFailure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.from
			for _, o := range tt.steps {
				h = h.Apply(o)
			}
			if h.State != tt.want {
				t.Errorf("got %s, want %s", h.State, tt.want)
			}
		})
	}
}

func TestHealthSessionRestart(t *testing.T) {
	h := Record{Skill: "walk", State: PermanentFailure, LastError: "x"}.Reset()
	if h.State != Healthy || h.Skill != "walk" || h.LastError != "" || !h.Usable() {
		t.Errorf("reset gave %+v", h)
	}
	if (Record{State: PermanentFailure}).Usable() {
		t.Error("a permanently failed skill is usable")
	}
}

func TestHealthIgnoresAResultAppliedTwice(t *testing.T) {
	h := Record{State: Healthy}
	o := Outcome{Key: "p/t/1", Category: "internal"}
	h = h.Apply(o).Apply(o).Apply(o)
	if h.State != Healthy || h.Failures != 1 {
		t.Errorf("one failure applied three times: %+v", h)
	}
}
