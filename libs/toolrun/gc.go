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

// TinyHeapBytes is the live heap under which every tool runs at
// tinyHeapGCPercent: a heap goal of at most 320 MB, below a small heap's
// 768 MB at GOGC=200, for collections that cost a run over a small
// model (qk-early's pipeline on 1472 tiles) 5% of its time.
const TinyHeapBytes = 64 << 20

// tinyHeapGCPercent is the GOGC under TinyHeapBytes.
const tinyHeapGCPercent = 400

// smallHeap and tinyHeap are SmallHeapBytes and TinyHeapBytes, which
// tests change (the monitor reads them on the finalizer goroutine).
var smallHeap, tinyHeap atomic.Uint64

func init() {
	smallHeap.Store(SmallHeapBytes)
	tinyHeap.Store(TinyHeapBytes)
}

// gcTier is a GOGC that holds while the live heap is under a bound.
type gcTier struct {
	below *atomic.Uint64
	pct   int
}

// The tools allocate much short-lived data (lowered programs, schedules)
// over a heap of a few hundred MB: the collector's default pace spends a
// fifth of the CPU on it. tuneGC lets the heap grow to 5x the live data
// between collections (GOGC=400, or the tool's app.Metadata[GCPercentKey]),
// under a soft limit of 4 GiB past which the collector runs as often as
// it must; GOGC and GOMEMLIMIT in the environment take precedence. A
// tool whose GOGC is lower starts at 400 while its live heap is under
// TinyHeapBytes, then at its small-heap GOGC, if it has one, while the
// live heap is under SmallHeapBytes; after each collection that leaves
// a tier's bytes or more live, it takes the next tier's GOGC, or its own
// for good.
func tuneGC(app *cli.App) {
	if os.Getenv("GOGC") == "" {
		pct := 400
		if v, ok := app.Metadata[GCPercentKey].(int); ok {
			pct = v
		}
		var tiers []gcTier
		if pct < tinyHeapGCPercent {
			tiers = append(tiers, gcTier{&tinyHeap, tinyHeapGCPercent})
		}
		if small, ok := app.Metadata[SmallHeapGCPercentKey].(int); ok {
			tiers = append(tiers, gcTier{&smallHeap, small})
		}
		if len(tiers) == 0 {
			debug.SetGCPercent(pct)
		} else {
			debug.SetGCPercent(tiers[0].pct)
			afterCollections(func() bool {
				live := liveHeap()
				passed := 0
				for passed < len(tiers) && live >= tiers[passed].below.Load() {
					passed++
				}
				if passed == len(tiers) {
					debug.SetGCPercent(pct)
					return false
				}
				if passed > 0 {
					tiers = tiers[passed:]
					debug.SetGCPercent(tiers[0].pct)
				}
				return true
			})
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
