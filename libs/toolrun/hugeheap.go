package toolrun

import (
	"os"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/urfave/cli/v2"
)

// Fresh pages are the tools' hidden cost: in the VM this project is
// measured on, a first touch of a 4 KiB page costs 7-10 us (the
// hypervisor fills a shadow page table entry), so a run that grows its
// heap to 90 MB (ipu-plan on qk-early) spends 150-200 ms in page faults,
// more than half its time. A 2 MiB transparent huge page costs one
// fault for 512 of them (80 MB touched: 215 ms in 4 KiB pages, 5 ms in
// huge ones). In its "madvise" mode (these hosts') Linux gives huge pages
// only to memory advised MADV_HUGEPAGE, and Go maps its heap without
// that advice. (In "always" mode the heap has them anyway, in "never"
// mode not at all: hugeHeap does nothing then.)
//
// hugeHeap therefore has the runtime map the first StartHugeHeapBytes of
// the heap with one large allocation it never writes, advises that range
// MADV_HUGEPAGE, and frees it with one collection of the still empty
// heap before the tool starts (about 3 ms): the allocator hands out the
// lowest free pages first, so the run's heap up to that size is made of
// huge pages. A tool that declares its heap per byte of its input file
// (HeapPerInputKey) has the start sized from that file instead: the
// range can only be advised before the runtime zeroes it, and it zeroes
// a later large allocation that reuses any page of the start's (a range
// ExpectHeap advised after the input was read, 550 MB for the BERT-base
// layer's plan, was faulted in 4 KiB pages by that zeroing before the
// advice: 1.4-1.6 s; advised at the start, the same heap took 5-10 ms to
// map and 0.05-0.9 s to touch, against 1.5-1.7 s in 4 KiB pages). A
// tool that has read its input calls ExpectHeap with the heap that input
// needs, which advises as much more the same way when the start did not
// (input on stdin; the start stays small otherwise because mapping a
// larger range costs more: 1 GiB at start took qk-early's five tools
// 20-40 ms longer). The heap beyond the advised range grows in 4 KiB
// pages as before; the collector's settings (gc.go) are unchanged.
// IPU_HUGEPAGES=0 turns it off (the resident set then grows in 4 KiB
// steps instead of 2 MiB).

// HeapPerInputKey is the app.Metadata key of a tool's heap per byte of
// its input file, its first positional argument (an int64; the start's
// advice is StartHugeHeapBytes when absent).
const HeapPerInputKey = "heap_per_input_byte"

// StartHugeHeapBytes is the heap every tool backs with huge pages before
// it starts; MaxHugeHeapBytes bounds what ExpectHeap advises in all (the
// free part of the advised range counts against the 4 GiB soft limit).
const (
	StartHugeHeapBytes = 128 << 20
	MaxHugeHeapBytes   = 2 << 30
)

// huge is the start's state and the heap advised so far (advised 0:
// none, turned off or refused). Tests run tools in process, in parallel:
// a mutex keeps the advice once a range.
var huge struct {
	sync.Mutex
	started bool
	advised int64
}

// hugeHeap advises the first StartHugeHeapBytes of the heap
// MADV_HUGEPAGE (see above), unless IPU_HUGEPAGES is "0", once a
// process: a later call (a test running another tool in process) finds
// the range advised. It reports whether the range is advised.
func hugeHeap() bool { return startHugeHeap(StartHugeHeapBytes) }

// startHugeHeap is hugeHeap advising n bytes (at least
// StartHugeHeapBytes, at most heapBound's).
func startHugeHeap(n int64) bool {
	huge.Lock()
	defer huge.Unlock()
	if huge.started {
		return huge.advised > 0
	}
	huge.started = true
	n = max(StartHugeHeapBytes, heapBound(n))
	if os.Getenv("IPU_HUGEPAGES") == "0" || !adviseHugeHeap(int(n)) {
		return false
	}
	huge.advised = n
	return true
}

// heapBound is n at most MaxHugeHeapBytes and half of both the
// collector's memory limit and the host's available memory (the range is
// mapped at once: a mapping the host refuses would end the process).
func heapBound(n int64) int64 {
	return min(n, MaxHugeHeapBytes, debug.SetMemoryLimit(-1)/2, availableMemory()/2)
}

// inputHeap is the start's advice for app run with args (flags first,
// flagsFirst): HeapPerInputKey times the size of the file the first
// positional argument names, or StartHugeHeapBytes.
func inputHeap(app *cli.App, args []string) int64 {
	per, ok := app.Metadata[HeapPerInputKey].(int64)
	if !ok {
		return StartHugeHeapBytes
	}
	i := slices.Index(args, "--")
	if i < 0 || i+1 == len(args) {
		return StartHugeHeapBytes
	}
	st, err := os.Stat(args[i+1])
	if err != nil || !st.Mode().IsRegular() {
		return StartHugeHeapBytes
	}
	return max(StartHugeHeapBytes, per*st.Size())
}

// ExpectHeap tells the harness that the run's heap will reach about n
// bytes: it backs the heap up to n with huge pages, as hugeHeap did the
// start, at most heapBound(n). It does nothing when hugeHeap did not run
// or was turned off, or when n is within what is advised (the start's
// advice sized from the input file covers it).
func ExpectHeap(n int64) {
	n = heapBound(n)
	huge.Lock()
	defer huge.Unlock()
	if huge.advised == 0 || n <= huge.advised {
		return
	}
	if adviseHugeHeap(int(n - huge.advised)) {
		huge.advised = n
	}
}
