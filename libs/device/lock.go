package device

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"ipu.local/libs/trace"
)

// LockPath is the default lock file of the device at path.
func LockPath(path string) string { return path + ".lock" }

// lockPoll is how often Acquire retries a held lock.
const lockPoll = 20 * time.Millisecond

// Lock is held hardware ownership: an exclusive flock on the lock file.
type Lock struct {
	path string
	f    *os.File
}

// Acquire takes exclusive ownership of the hardware guarded by the lock
// file at path, creating the file if needed. It retries every 20 ms while
// another process holds it, and fails once timeout has passed. The owner's
// pid is written into the file for the error message of a waiting process.
func Acquire(path string, timeout time.Duration, log *slog.Logger) (*Lock, error) {
	log.Info("waiting for hardware ownership", trace.Bare("path", path))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("hardware ownership: %w", err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("hardware ownership: lock %s: %w", path, err)
		}
		if !time.Now().Before(deadline) {
			holder := "another process"
			if pid := readPid(path); pid > 0 {
				holder = fmt.Sprintf("another process (pid %d)", pid)
			}
			f.Close()
			return nil, fmt.Errorf("hardware ownership not acquired within %s: %s is held by %s", timeout, path, holder)
		}
		time.Sleep(min(lockPoll, time.Until(deadline)))
	}
	l := &Lock{path: path, f: f}
	if err := l.writePid(); err != nil {
		l.Release()
		return nil, err
	}
	log.Info("acquired hardware ownership", trace.Bare("path", path))
	return l, nil
}

func (l *Lock) writePid() error {
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("hardware ownership: %s: %w", l.path, err)
	}
	if _, err := l.f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		return fmt.Errorf("hardware ownership: %s: %w", l.path, err)
	}
	return nil
}

// readPid returns the pid recorded in the lock file, or 0.
func readPid(path string) int {
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 32 {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// Release gives ownership up. The lock file stays: removing it would let
// two processes lock two different files of the same name.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	l.f.Truncate(0)
	err := l.f.Close() // closing the last descriptor drops the flock
	l.f = nil
	if err != nil {
		return fmt.Errorf("hardware ownership: release %s: %w", l.path, err)
	}
	return nil
}
