//go:build !unix

package embedded

// dirLock does nothing where flock is not available: two servers on one
// data dir are not detected there.
type dirLock struct{}

func lockDir(string) (*dirLock, error) { return &dirLock{}, nil }

func (*dirLock) unlock() {}
