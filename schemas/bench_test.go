package schemas

import "testing"

func BenchmarkValidateToolResult(b *testing.B) {
	doc := []byte(`{"planId":"p1","requestId":"r1","toolId":"f12","skill":"echo","attempt":1,"state":"succeeded","output":{},"workerId":"worker-1","startedAt":"2026-11-25T23:19:24.547Z","finishedAt":"2026-11-25T23:19:24.548Z","durationMs":0.012,"token":"3q2-7wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`)
	for b.Loop() {
		if err := Validate(ToolResult, doc); err != nil {
			b.Fatal(err)
		}
	}
}
