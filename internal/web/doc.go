// Package web is planbus's web view: pages that list requests as they
// change, show a request's attempts and outcome, draw a plan's DAG with
// its tools coloured by state as the plan runs and its critical path
// marked, show each tool's attempts, input, output, error, worker and
// durations, the skills with the workers that serve them and their health
// per session, and the system's components and backlogs; and the actions
// to submit a plan or request and to cancel one.
//
// A Server is an http.Handler built on a NATS connection. It does only
// what planbus's client role may do (see docs/architecture.md, Roles and
// permissions): it calls the planner's endpoints through package client,
// reads buckets by key and streams by subject, asks the micro services'
// discovery subjects, and reads stream and consumer info. It creates no
// consumer: live updates are server-sent events fed by plain
// subscriptions to the events subjects (client.WatchPlan for a plan).
//
// The DAG is laid out by package layout (layered, left to right, in pure
// Go: the commands that do not serve the view load nothing for it), drawn
// once per plan as SVG and coloured in the browser. Pages are
// html/template, parsed by New; the stylesheet and a small plain script
// are embedded in the binary.
//
// Security: with Config.Token every route asks for the token (a login
// form, a ?token= link, or an Authorization bearer header), kept in an
// HttpOnly, SameSite=Strict cookie; without one, only requests addressed
// to a loopback name are answered. Forms that change something (submit,
// cancel) carry a CSRF token and cross-origin posts are refused
// (http.CrossOriginProtection). Every answer has a Content-Security-Policy
// that allows scripts and styles from the view only.
package web
