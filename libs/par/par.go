// Package par runs the iterations of a loop on several goroutines.
package par

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Cores is the number of host cores Go runs on (GOMAXPROCS).
func Cores() int { return runtime.GOMAXPROCS(0) }

// For calls fn(w, i) for every i in [0, n) on min(workers, n) goroutines
// and returns when every call has: w is the calling worker's index, in
// [0, workers), for state a worker keeps to itself. The items go out in
// order as workers free up, so uneven items balance; fn must touch only
// its item's state and its worker's. A panic in fn stops the loop and is
// raised again in the caller's goroutine.
func For(n, workers int, fn func(w, i int)) {
	workers = min(workers, n)
	if workers <= 1 {
		for i := range n {
			fn(0, i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed sync.Once
	var panicked any
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					failed.Do(func() { panicked = r })
					next.Store(int64(n)) // the others stop at their next item
				}
			}()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(w, i)
			}
		}()
	}
	wg.Wait()
	if panicked != nil {
		// On the caller's goroutine, where the tools turn it into a
		// one-line internal error instead of a crash.
		panic(panicked)
	}
}

// Background starts f on a goroutine of its own and returns a function
// that waits for f's result (any number of times). The tools hash a file
// for its fingerprint this way while they decode it.
func Background[T any](f func() T) func() T {
	var v T
	done := make(chan struct{})
	go func() {
		defer close(done)
		v = f()
	}()
	return func() T {
		<-done
		return v
	}
}
