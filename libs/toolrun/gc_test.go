package toolrun

import (
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// gcPercent reads the current GOGC.
func gcPercent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

// collectUntil runs collections until ok holds (the finalizers run on
// their own goroutine), failing after a few seconds.
func collectUntil(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met after collections")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

func TestAfterCollections(t *testing.T) {
	var calls atomic.Int32
	afterCollections(func() bool { return calls.Add(1) < 3 })
	collectUntil(t, func() bool { return calls.Load() >= 3 })
	for range 5 {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("f called %d times, want 3 (it returned false on the third)", n)
	}
}

func TestTuneGCSmallHeap(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	old, oldLimit := gcPercent(), debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		smallHeap.Store(SmallHeapBytes)
		tinyHeap.Store(TinyHeapBytes)
		debug.SetGCPercent(old)
		debug.SetMemoryLimit(oldLimit)
	})
	app := &cli.App{Metadata: map[string]any{GCPercentKey: 100, SmallHeapGCPercentKey: 200}}

	// A live heap under the tiny bound keeps GOGC=400.
	tinyHeap.Store(1 << 62)
	smallHeap.Store(1 << 62)
	tuneGC(app)
	if p := gcPercent(); p != 400 {
		t.Fatalf("GOGC %d at the start, want 400", p)
	}
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if p := gcPercent(); p != 400 {
		t.Fatalf("GOGC %d after a collection under the tiny bound, want 400", p)
	}
	// Past it, the small-heap GOGC while under the small bound.
	tinyHeap.Store(1)
	collectUntil(t, func() bool { return gcPercent() == 200 })
	tinyHeap.Store(1 << 62) // the tiers only go down
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if p := gcPercent(); p != 200 {
		t.Fatalf("GOGC %d after a collection under the small bound, want 200", p)
	}
	// Past the small bound, the tool's own, for good.
	smallHeap.Store(1)
	collectUntil(t, func() bool { return gcPercent() == 100 })
	smallHeap.Store(1 << 62)
	debug.SetGCPercent(150) // the monitor stopped: nothing sets it back
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if p := gcPercent(); p != 150 {
		t.Errorf("GOGC %d: the heap monitor still runs after switching", p)
	}

	// Both bounds passed at one collection: the tool's own at once.
	tinyHeap.Store(1 << 62)
	smallHeap.Store(1 << 62)
	tuneGC(app)
	tinyHeap.Store(1)
	smallHeap.Store(1)
	collectUntil(t, func() bool { return gcPercent() == 100 })

	// Without a small-heap GOGC: 400 under the tiny bound, then the
	// tool's.
	tinyHeap.Store(1 << 62)
	tuneGC(&cli.App{Metadata: map[string]any{GCPercentKey: 120}})
	if p := gcPercent(); p != 400 {
		t.Errorf("GOGC %d at the start without a small-heap value, want 400", p)
	}
	tinyHeap.Store(1)
	collectUntil(t, func() bool { return gcPercent() == 120 })

	// A tool at 400 or more has no tiers.
	tuneGC(&cli.App{Metadata: map[string]any{GCPercentKey: 500}})
	if p := gcPercent(); p != 500 {
		t.Errorf("GOGC %d for a tool at 500, want 500", p)
	}
}
