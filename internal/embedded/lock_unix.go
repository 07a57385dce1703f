//go:build unix

package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFile is the file in a data dir that its server holds locked.
const lockFile = "planbus.lock"

// dirLock is an exclusive advisory lock (flock) on a data dir. The kernel
// releases it when the process ends, however it ends, so a kill -9 leaves
// no stale lock behind.
type dirLock struct{ f *os.File }

// lockDir takes dir's lock, or fails with ErrDataDirInUse naming the
// process that holds it. It writes its own PID into the lock file only
// once it holds the lock, so a refused caller changes nothing.
func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("bus: data dir %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = "process " + strconv.Itoa(pid)
			}
		}
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is held by %s (PID in %s); stop it, connect to it with --nats-url, or pick another --data-dir",
				ErrDataDirInUse, dir, holder, path)
		}
		return nil, fmt.Errorf("bus: lock data dir %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

// unlock releases the lock. The PID stays in the file; it means nothing
// without the lock.
func (l *dirLock) unlock() {
	if l == nil {
		return
	}
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
}
