package toolrun

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"

	"github.com/urfave/cli/v2"
)

// GCPercentKey is the app.Metadata key of a tool's GOGC (an int; 400
// when absent).
const GCPercentKey = "gc_percent"

// SmallHeapGCPercentKey is the app.Metadata key of a tool's GOGC while
// its live heap is under SmallHeapBytes (an int; none when absent): a
// run over a small heap pays for each collection and little for fresh
// pages, a run over a large one the other way round.
const SmallHeapGCPercentKey = "small_heap_gc_percent"

// SmallHeapBytes is the live heap past which a tool with a small-heap
// GOGC takes its GCPercentKey one for the rest of the run.
const SmallHeapBytes = 256 << 20

// smallHeap is SmallHeapBytes, which tests change (the monitor reads it
// on the finalizer goroutine).
var smallHeap atomic.Uint64

func init() { smallHeap.Store(SmallHeapBytes) }

// The tools allocate much short-lived data (lowered programs, schedules)
// over a heap of a few hundred MB: the collector's default pace spends a
// fifth of the CPU on it. tuneGC lets the heap grow to 5x the live data
// between collections (GOGC=400, or the tool's app.Metadata[GCPercentKey]),
// under a soft limit of 4 GiB past which the collector runs as often as
// it must; GOGC and GOMEMLIMIT in the environment take precedence. A
// tool with a small-heap GOGC starts with it, and after each collection
// that leaves SmallHeapBytes or more live, takes its own for good.
func tuneGC(app *cli.App) {
	if os.Getenv("GOGC") == "" {
		pct := 400
		if v, ok := app.Metadata[GCPercentKey].(int); ok {
			pct = v
		}
		if small, ok := app.Metadata[SmallHeapGCPercentKey].(int); ok {
			debug.SetGCPercent(small)
			afterCollections(func() bool {
				if liveHeap() < smallHeap.Load() {
					return true
				}
				debug.SetGCPercent(pct)
				return false
			})
		} else {
			debug.SetGCPercent(pct)
		}
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(4 << 30)
	}
}

// gcSentinel is an object only a finalizer refers to: the collection
// that finds it unreachable runs the finalizer. It holds a pointer, so
// that it is never a tiny allocation (whose finalizers may not run).
type gcSentinel struct {
	_ *byte
	_ [8]byte
}

// afterCollections calls f on the finalizer goroutine after each
// collection, from the next one on, while f returns true.
func afterCollections(f func() bool) {
	runtime.SetFinalizer(new(gcSentinel), func(*gcSentinel) {
		if f() {
			afterCollections(f)
		}
	})
}

// liveHeap is the heap the last collection found live, in bytes.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
