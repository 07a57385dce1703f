package worker

import "time"

// SetFlush replaces the round trip Run makes to the server before it
// serves, so a test can make it fail.
func SetFlush(w *Worker, flush func() error) { w.flush = flush }

// SetAckWaitRefresh sets how often workers made after it (New) read their
// consumers' AckWait again, and returns a function that restores it.
func SetAckWaitRefresh(d time.Duration) (restore func()) {
	old := ackWaitRefresh
	ackWaitRefresh = d
	return func() { ackWaitRefresh = old }
}
