package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// MetricsGuard beyond loopback: a view with a login asks for its token as
// a bearer; a --metrics listener (no login) answers any host.
func TestMetricsGuard(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	for _, tc := range []struct {
		name    string
		token   string
		anyHost bool
		host    string
		auth    string
		want    int
	}{
		{"loopback, by name", "", false, "localhost:9464", "", http.StatusOK},
		{"loopback, by address", "", false, "[::1]:9464", "", http.StatusOK},
		{"loopback, a rebound name", "", false, "evil.example", "", http.StatusMisdirectedRequest},
		{"loopback with a login: no token needed", "secret-token-0123456789", false, "127.0.0.1:1", "", http.StatusOK},
		{"beyond loopback with a login, no token", "secret-token-0123456789", true, "planbus.internal", "", http.StatusUnauthorized},
		{"beyond loopback with a login, wrong token", "secret-token-0123456789", true, "planbus.internal", "Bearer nope", http.StatusUnauthorized},
		{"beyond loopback with a login, its token", "secret-token-0123456789", true, "planbus.internal", "Bearer secret-token-0123456789", http.StatusOK},
		{"--metrics beyond loopback", "", true, "planbus.internal", "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+tc.host+"/metrics", nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			MetricsGuard(ok, tc.token, tc.anyHost).ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("got %d, want %d", rec.Code, tc.want)
			}
		})
	}
}
