package par

import (
	"sync/atomic"
	"testing"
)

// Every item is called once, each by one worker in range, for worker
// counts below, at and above the item count.
func TestFor(t *testing.T) {
	for _, c := range []struct{ n, workers int }{{0, 4}, {1, 4}, {7, 1}, {7, 3}, {100, 8}, {5, 0}} {
		calls := make([]atomic.Int32, c.n)
		var bad atomic.Int32
		For(c.n, c.workers, func(w, i int) {
			if w < 0 || w >= max(c.workers, 1) {
				bad.Add(1)
			}
			calls[i].Add(1)
		})
		if bad.Load() != 0 {
			t.Errorf("%+v: a worker index out of range", c)
		}
		for i := range calls {
			if got := calls[i].Load(); got != 1 {
				t.Errorf("%+v: item %d called %d times", c, i, got)
			}
		}
	}
}

// A panic in an item reaches the caller, where a recover can take it.
func TestForPanic(t *testing.T) {
	for _, workers := range []int{1, 3} {
		got := func() (r any) {
			defer func() { r = recover() }()
			For(50, workers, func(_, i int) {
				if i == 7 {
					panic("item 7")
				}
			})
			return nil
		}()
		if got != "item 7" {
			t.Errorf("%d workers: recovered %v, want the item's panic", workers, got)
		}
	}
}

// Background's result is f's, however often it is asked for, and f runs
// once.
func TestBackground(t *testing.T) {
	var calls atomic.Int32
	wait := Background(func() int { calls.Add(1); return 42 })
	for range 3 {
		if got := wait(); got != 42 {
			t.Fatalf("Background result %d, want 42", got)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("f ran %d times, want 1", n)
	}
}
