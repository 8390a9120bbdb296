package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// pairLock is held by a configuration from its ipu-load to the end of
// its ipu-check: the tools take the device's ownership lock (DEV.lock)
// one at a time, and without it another job sharing the device could
// load its package between them. It is DEV.sweep.lock, an flock, so
// that the tools' own lock stays theirs.
type pairLock struct{ f *os.File }

// acquirePair takes the pair lock of device, waiting up to timeout.
func acquirePair(ctx context.Context, device string, timeout time.Duration) (*pairLock, error) {
	path := device + ".sweep.lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, errors.New("sweep: device lock: " + pathErr(err))
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return &pairLock{f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("sweep: device lock %s: %v", path, err)
		}
		if !time.Now().Before(deadline) {
			f.Close()
			return nil, fmt.Errorf("sweep: device lock %s not acquired within %s", path, timeout)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (l *pairLock) release() {
	if l != nil {
		l.f.Close() // closing the last descriptor releases the flock
	}
}
