package worker

// SetFlush replaces the round trip Run makes to the server before it
// serves, so a test can make it fail.
func SetFlush(w *Worker, flush func() error) { w.flush = flush }
