package export

import (
	"strings"
	"testing"
)

func TestEnabledFollowsTheOTELVariables(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		on   bool
		err  string // a part of the error, "" for none
	}{
		{name: "nothing set", env: nil},
		{name: "an endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, on: true},
		{name: "a traces endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, on: true},
		{name: "exporter otlp", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{name: "exporter none beats an endpoint",
			env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}},
		{name: "sdk disabled beats everything",
			env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "another exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER"},
		{name: "grpc", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			err: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{name: "the traces protocol wins", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true},
		{name: "protocol without tracing on", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			on, err := Enabled(func(k string) string { return tc.env[k] })
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one naming %s", err, tc.err)
			case tc.err == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			}
			if on != tc.on {
				t.Errorf("enabled %v, want %v", on, tc.on)
			}
		})
	}
}
