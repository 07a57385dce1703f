package skills_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/skills"
)

// countingServer answers "ok" and counts the requests that reach it.
func countingServer(t *testing.T, srv *httptest.Server) *atomic.Int32 {
	t.Helper()
	var hits atomic.Int32
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, "ok")
	})
	srv.Start()
	t.Cleanup(srv.Close)
	return &hits
}

// TestHTTPRefusesLocalAddressesByDefault calls servers that listen on
// loopback addresses, under names and forms that hide that, with the
// default config: each call must be refused before a connection is made,
// naming the host, the address and the flag that would allow it.
func TestHTTPRefusesLocalAddressesByDefault(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	hits := countingServer(t, srv)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	tests := []struct {
		name, url, host, addr string
	}{
		{"loopback IP", "http://127.0.0.1:" + port + "/", "", "127.0.0.1"},
		{"a name for loopback", "http://localhost:" + port + "/", `host "localhost" resolves to`, "address"},
		{"userinfo that looks like a host", "http://localhost:1@127.0.0.1:" + port + "/", "", "127.0.0.1"},
		{"another loopback IP", "http://127.0.0.2:" + port + "/", "", "127.0.0.2"},
		{"IPv4-mapped IPv6", "http://[::ffff:127.0.0.1]:" + port + "/", "", `host "::ffff:127.0.0.1" resolves to address 127.0.0.1 (loopback)`},
		{"0.0.0.0 reaches this host", "http://0.0.0.0:" + port + "/", "", "0.0.0.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := callHTTP(t.Context(), t, skills.HTTPConfig{}, map[string]any{"url": tt.url})
			wantError(t, err, planbus.CategoryPermanent, planbus.CodeHTTPAddressRefused)
			wantMessage(t, err, tt.host, tt.addr)
			if !strings.Contains(err.Error(), "--http-allow-private") && !strings.Contains(err.Error(), "never connects") {
				t.Errorf("error %q names no flag", err)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server got %d requests, want 0", n)
	}

	t.Run("IPv6 loopback", func(t *testing.T) {
		ln, err := net.Listen("tcp6", "[::1]:0")
		if err != nil {
			t.Skipf("no IPv6 loopback: %v", err)
		}
		srv6 := httptest.NewUnstartedServer(nil)
		srv6.Listener.Close()
		srv6.Listener = ln
		hits6 := countingServer(t, srv6)
		_, err = callHTTP(t.Context(), t, skills.HTTPConfig{}, map[string]any{"url": srv6.URL})
		wantError(t, err, planbus.CategoryPermanent, planbus.CodeHTTPAddressRefused)
		wantMessage(t, err, "address ::1 (loopback)", "--http-allow-private")
		if n := hits6.Load(); n != 0 {
			t.Errorf("the server got %d requests, want 0", n)
		}
		if _, err := callHTTP(t.Context(), t, local, map[string]any{"url": srv6.URL}); err != nil {
			t.Errorf("with AllowPrivate: %v", err)
		}
	})

	t.Run("an allowed name still meets the address rule", func(t *testing.T) {
		_, err := callHTTP(t.Context(), t, skills.HTTPConfig{AllowHosts: []string{"localhost"}},
			map[string]any{"url": "http://localhost:" + port + "/"})
		wantError(t, err, planbus.CategoryPermanent, planbus.CodeHTTPAddressRefused)
		wantMessage(t, err, `host "localhost" resolves to address`, "--http-allow-private")
	})

	t.Run("AllowPrivate opens them", func(t *testing.T) {
		before := hits.Load()
		for _, url := range []string{"http://127.0.0.1:" + port + "/", "http://localhost:" + port + "/"} {
			if _, err := callHTTP(t.Context(), t, local, map[string]any{"url": url}); err != nil {
				t.Errorf("%s: %v", url, err)
			}
		}
		if got := hits.Load() - before; got != 2 {
			t.Errorf("the server got %d requests, want 2", got)
		}
	})
}

// TestHTTPAddressesNeverDialled checks addresses where nothing listens in
// a test: the refusal comes before any packet leaves, so the tests need
// no network.
func TestHTTPAddressesNeverDialled(t *testing.T) {
	tests := []struct {
		url     string
		cfg     skills.HTTPConfig
		want    []string
		comment string
	}{
		{"http://169.254.169.254/latest/meta-data/", skills.HTTPConfig{}, []string{"address 169.254.169.254 (link-local)", "--http-allow-private", "name the host in --http-allow"}, "cloud metadata"},
		{"http://169.254.169.254/", local, []string{"169.254.169.254", "with --http-allow-private alone link-local addresses stay refused"}, "metadata with AllowPrivate alone"},
		{"http://[fe80::1%25lo]/", skills.HTTPConfig{}, []string{"address fe80::1 (link-local)"}, "IPv6 link-local"},
		{"http://10.1.2.3/", skills.HTTPConfig{}, []string{"address 10.1.2.3 (private (RFC 1918))", "--http-allow-private"}, "RFC 1918"},
		{"http://172.16.0.1/", skills.HTTPConfig{}, []string{"address 172.16.0.1 (private"}, "RFC 1918"},
		{"http://192.168.1.1/", skills.HTTPConfig{}, []string{"address 192.168.1.1 (private"}, "RFC 1918"},
		{"http://100.64.0.1/", skills.HTTPConfig{}, []string{"address 100.64.0.1 (shared (CGNAT"}, "CGNAT"},
		{"http://[fd00::1]/", skills.HTTPConfig{}, []string{"address fd00::1 (unique-local"}, "ULA"},
		{"http://[::ffff:169.254.169.254]/", skills.HTTPConfig{}, []string{"address 169.254.169.254 (link-local)"}, "mapped metadata"},
		{"http://[64:ff9b::a9fe:a9fe]/", skills.HTTPConfig{}, []string{"address 64:ff9b::a9fe:a9fe (link-local, as NAT64 IPv6)"}, "NAT64 metadata"},
		{"http://224.0.0.1/", local, []string{"address 224.0.0.1 (multicast)", "never connects"}, "multicast, even with AllowPrivate"},
		{"http://255.255.255.255/", local, []string{"(broadcast)"}, "broadcast"},
		{"http://[::]/", local, []string{"address :: (unspecified)"}, "IPv6 unspecified"},
		{"http://[ff02::1]/", local, []string{"multicast"}, "IPv6 multicast"},
	}
	for _, tt := range tests {
		t.Run(tt.comment+" "+tt.url, func(t *testing.T) {
			_, err := callHTTP(t.Context(), t, tt.cfg, map[string]any{"url": tt.url, "timeoutMs": 5000})
			wantError(t, err, planbus.CategoryPermanent, planbus.CodeHTTPAddressRefused)
			wantMessage(t, err, tt.want...)
		})
	}
}

// TestHTTPRedirectMeetsTheAddressRule follows a redirect from an allowed
// server to a place the rule refuses: the redirect target, though a live
// server, gets nothing.
func TestHTTPRedirectMeetsTheAddressRule(t *testing.T) {
	target := httptest.NewUnstartedServer(nil)
	hits := countingServer(t, target)
	_, port, _ := net.SplitHostPort(target.Listener.Addr().String())
	origin := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-any":
			// 0.0.0.0 reaches the target on this host; it is never allowed.
			http.Redirect(w, r, "http://0.0.0.0:"+port+"/", http.StatusFound)
		case "/to-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		}
	})
	for _, path := range []string{"/to-any", "/to-metadata"} {
		t.Run(path, func(t *testing.T) {
			_, err := callHTTP(t.Context(), t, local, map[string]any{"url": origin.URL + path, "timeoutMs": 5000})
			wantError(t, err, planbus.CategoryPermanent, planbus.CodeHTTPAddressRefused)
			wantMessage(t, err, "GET "+origin.URL+path)
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the redirect target got %d requests, want 0", n)
	}
}

// TestHTTPLargeBodies checks that a body larger than the caps comes back
// truncated within the output cap, whatever its bytes cost in JSON.
func TestHTTPLargeBodies(t *testing.T) {
	tests := []struct {
		name        string
		body        []byte
		contentType string
		wantLen     int // bytes of body kept; 0: any, as long as it fits
	}{
		{"1 MiB of text", bytes.Repeat([]byte("x"), 1<<20), "text/plain", skills.DefaultBodyCap},
		{"3 MiB of text", bytes.Repeat([]byte("abc\n"), 3<<18), "text/plain", 0},
		{"1 MiB of JSON", []byte(`"` + strings.Repeat("y", 1<<20-2) + `"`), "application/json", skills.DefaultBodyCap},
		{"1 MiB of quotes", bytes.Repeat([]byte(`"`), 1<<20), "text/plain", 0},
		{"1 MiB of control bytes", bytes.Repeat([]byte{1}, 1<<20), "application/octet-stream", 0},
		{"1 MiB of invalid UTF-8", bytes.Repeat([]byte{0xff}, 1<<20), "application/octet-stream", 0},
		{"1 MiB of line separators", bytes.Repeat([]byte("\u2028"), 1<<20/3), "text/plain", 0},
		{"HTML is not escaped", bytes.Repeat([]byte("<&>"), 1<<18), "text/html", skills.DefaultBodyCap},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				_, _ = w.Write(tt.body)
			})
			res, err := callHTTP(t.Context(), t, local, map[string]any{"url": srv.URL})
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			if len(res.Output) > skills.DefaultHTTPOutputCap {
				t.Errorf("output of %d bytes, want at most %d", len(res.Output), skills.DefaultHTTPOutputCap)
			}
			out := decodeHTTP(t, res.Output)
			var body string
			if err := json.Unmarshal(out.Body, &body); err != nil {
				t.Fatalf("body %.40s...: %v, want a string", out.Body, err)
			}
			if !out.Truncated {
				t.Error("truncated is false, want true")
			}
			if tt.wantLen > 0 && len(body) != tt.wantLen {
				t.Errorf("kept %d bytes of the body, want %d", len(body), tt.wantLen)
			}
			if len(body) < skills.DefaultHTTPOutputCap/8 {
				t.Errorf("kept only %d bytes of the body", len(body))
			}
			if !strings.HasPrefix(asJSONDecodes(tt.body), body) {
				t.Errorf("the body kept is not a prefix of the body sent")
			}
		})
	}

	t.Run("a smaller output cap", func(t *testing.T) {
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"a":"`+strings.Repeat("z", 5000)+`"}`)
		})
		cfg := skills.HTTPConfig{AllowPrivate: true, OutputCap: 2000}
		res, err := callHTTP(t.Context(), t, cfg, map[string]any{"url": srv.URL})
		if err != nil {
			t.Fatalf("got error %v", err)
		}
		out := decodeHTTP(t, res.Output)
		if len(res.Output) > 2000 || !out.Truncated || !strings.HasPrefix(string(out.Body), `"{\"a\":\"zzz`) {
			t.Errorf("got %d bytes, truncated %v, body %.30s...; want at most 2000, true, the JSON cut as a string",
				len(res.Output), out.Truncated, out.Body)
		}
	})
}

// asJSONDecodes returns b as a JSON string of it decodes: each byte that
// is not part of valid UTF-8 becomes U+FFFD.
func asJSONDecodes(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		sb.WriteRune(r)
		b = b[size:]
	}
	return sb.String()
}
