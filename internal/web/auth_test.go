package web_test

import (
	"errors"
	"time"

	"github.com/rs/zerolog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/planbus/planbus/internal/web"
)

const token = "0123456789abcdef0123456789abcdef"

// With a token, every page asks for it: a link with it logs in (and
// leaves the address without it), so do the form and a bearer header; a
// wrong one is refused; the cookie does not hold the token.
func TestTokenLogin(t *testing.T) {
	s := start(t, web.Config{Token: token})

	first := s.get(t, "/requests?status=succeeded")
	first.must(t, "a page before the login", http.StatusSeeOther)
	if loc := first.hdr.Get("Location"); loc != "/login?next="+url.QueryEscape("/requests?status=succeeded") {
		t.Errorf("to %q, want the login with the page to come back to", loc)
	}
	s.get(t, "/login").must(t, "login page", http.StatusOK, `name="token"`)
	s.get(t, "/static/style.css").must(t, "the stylesheet, for the login page", http.StatusOK, ".badge")
	s.get(t, "/requests?token=wrong-token-wrong-token").must(t, "a wrong token", http.StatusUnauthorized, "not this view")
	s.post(t, "/login", url.Values{"token": {"wrong"}}).must(t, "a wrong token in the form", http.StatusUnauthorized)
	p := s.do(t, http.MethodGet, "/events", nil, http.Header{"Accept": {"text/event-stream"}})
	p.must(t, "a stream before the login", http.StatusUnauthorized)

	in := s.get(t, "/requests?token="+token+"&status=succeeded")
	in.must(t, "a link with the token", http.StatusSeeOther)
	if loc := in.hdr.Get("Location"); loc != "/requests?status=succeeded" {
		t.Errorf("after the login: to %q, want the same page without the token", loc)
	}
	cookie := in.hdr.Get("Set-Cookie")
	for _, want := range []string{"planbus_session=", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(cookie, want) {
			t.Errorf("cookie %q: no %s", cookie, want)
		}
	}
	if strings.Contains(cookie, token) {
		t.Errorf("cookie %q holds the token itself", cookie)
	}
	s.get(t, "/requests").must(t, "a page after the login", http.StatusOK, "signed in")

	// Another visitor: the form, then a bearer token.
	other := start(t, web.Config{Token: token})
	out := other.post(t, "/login", url.Values{"token": {token}, "next": {"//elsewhere.example/x"}})
	out.must(t, "the login form", http.StatusSeeOther)
	if loc := out.hdr.Get("Location"); loc != "/requests" {
		t.Errorf("after the login form: to %q, want /requests (never another site)", loc)
	}
	other.http.Jar = nil
	other.do(t, http.MethodGet, "/system", nil, http.Header{"Authorization": {"Bearer " + token}}).must(t, "a bearer token", http.StatusOK)
	other.do(t, http.MethodGet, "/system", nil, http.Header{"Authorization": {"Bearer nope"}}).must(t, "a wrong bearer token", http.StatusSeeOther)
}

// Without a token, the view answers only requests addressed to a
// loopback name, unless told to answer any.
func TestHostCheck(t *testing.T) {
	s := start(t, web.Config{})
	for host, code := range map[string]int{"localhost:8080": http.StatusOK, "127.0.0.1": http.StatusOK, "[::1]:1": http.StatusOK,
		"rebound.example": http.StatusMisdirectedRequest, "127.0.0.1.example:80": http.StatusMisdirectedRequest} {
		req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/submit", nil)
		req.Host = host
		resp, err := s.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != code {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, code)
		}
	}
	anyHost := start(t, web.Config{AnyHost: true})
	req, _ := http.NewRequest(http.MethodGet, anyHost.srv.URL+"/submit", nil)
	req.Host = "view.example"
	resp, err := anyHost.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("AnyHost: %d, want 200", resp.StatusCode)
	}
}

// New refuses a bad configuration, naming the field.
func TestNewRefusesBadConfig(t *testing.T) {
	s := start(t, web.Config{})
	for _, tc := range []struct {
		cfg  web.Config
		want string
	}{
		{web.Config{Token: "short"}, "Token"},
		{web.Config{GraphLimit: -1}, "GraphLimit"},
		{web.Config{MaxStreams: -1}, "MaxStreams"},
		{web.Config{Discovery: -1}, "Discovery"},
		{web.Config{Discovery: 2 * time.Minute}, "Discovery"},
	} {
		_, err := web.New(s.conn.NC, tc.cfg, zerolog.Nop())
		if !errors.Is(err, web.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
	if _, err := web.New(nil, web.Config{}, zerolog.Nop()); !errors.Is(err, web.ErrInvalidConfig) {
		t.Errorf("no connection: %v, want ErrInvalidConfig", err)
	}
}
