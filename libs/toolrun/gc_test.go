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
		debug.SetGCPercent(old)
		debug.SetMemoryLimit(oldLimit)
	})
	app := &cli.App{Metadata: map[string]any{GCPercentKey: 100, SmallHeapGCPercentKey: 200}}

	// A live heap under the bound keeps the small-heap GOGC.
	smallHeap.Store(1 << 62)
	tuneGC(app)
	if p := gcPercent(); p != 200 {
		t.Fatalf("GOGC %d at the start, want 200", p)
	}
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if p := gcPercent(); p != 200 {
		t.Fatalf("GOGC %d after a collection under the bound, want 200", p)
	}
	// Past the bound, the tool's own, for good.
	smallHeap.Store(1)
	collectUntil(t, func() bool { return gcPercent() == 100 })
	smallHeap.Store(1 << 62)
	debug.SetGCPercent(150) // the monitor stopped: nothing sets it back
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if p := gcPercent(); p != 150 {
		t.Errorf("GOGC %d: the small-heap monitor still runs after switching", p)
	}

	// Without a small-heap GOGC, the tool's from the start.
	tuneGC(&cli.App{Metadata: map[string]any{GCPercentKey: 120}})
	if p := gcPercent(); p != 120 {
		t.Errorf("GOGC %d without a small-heap value, want 120", p)
	}
}
