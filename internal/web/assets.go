package web

import (
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The view's pages (html/template) and its stylesheet and script, in the
// binary: nothing is fetched from elsewhere, and no Node toolchain builds
// them.
//
//go:embed templates/*.html static/*
var assets embed.FS

// pages returns the templates by name: each page is the layout with the
// page's "content"; fragments (requests-table, tool-panel) are templates
// of their pages' sets. They are parsed on the first call (New makes it),
// not at package init: every command of the binary that carries the view
// would pay for them at start.
var pages = sync.OnceValue(func() map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, name := range []string{"requests", "request", "plan", "tool", "skills", "system", "submit", "login", "error", "agent", "schedules"} {
		out[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+name+".html"))
	}
	out["requests-table"] = out["requests"]
	out["tool-panel"] = out["tool"]
	return out
})

var funcs = template.FuncMap{
	// age is how long ago t was, as a listing shows it: 45s, 12m, 3h, 2d.
	"age": func(now, t time.Time) string {
		if t.IsZero() {
			return ""
		}
		d := now.Sub(t)
		switch {
		case d < time.Minute:
			return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
		case d < time.Hour:
			return fmt.Sprintf("%dm", int(d.Minutes()))
		case d < 48*time.Hour:
			return fmt.Sprintf("%dh", int(d.Hours()))
		}
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	},
	// ms shows a duration in milliseconds.
	"ms": func(ms float64) string {
		if ms <= 0 {
			return ""
		}
		d := time.Duration(ms * float64(time.Millisecond))
		if d < 10*time.Millisecond {
			return d.Round(10 * time.Microsecond).String()
		}
		return d.Round(time.Millisecond).String()
	},
	// msi shows a whole number of milliseconds.
	"msi": func(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() },
	// between is the time from a to b (or to now while b is zero).
	"between": func(a, b, now time.Time) string {
		if a.IsZero() {
			return ""
		}
		if b.IsZero() {
			b = now
		}
		return b.Sub(a).Round(time.Millisecond).String()
	},
	"clock": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.Local().Format("15:04:05.000")
	},
	"stamp": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.Local().Format("2006-01-02 15:04:05")
	},
	"pretty":    func(raw json.RawMessage) string { return pretty(raw) },
	"join":      strings.Join,
	"inc":       func(n int) int { return n + 1 },
	"ended":     ended,
	"planEnded": planEnded,
	"json": func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	},
}

// staticFiles serves the stylesheet and the script.
func staticFiles() http.Handler {
	sub, err := fs.Sub(assets, "static")
	if err != nil {
		panic(err) // the embedded tree has static/: a build without it does not compile
	}
	return http.FileServerFS(sub)
}
