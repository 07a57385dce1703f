// Package bus connects planbus components to NATS: to an external server or
// cluster (URL, credentials file, nkey seed, TLS CA), or to a JetStream
// server embedded in the process. It declares the streams and KV buckets
// every component relies on, idempotently, and holds every subject, stream,
// consumer and bucket name in one place (names.go).
package bus
