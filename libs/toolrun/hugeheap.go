package toolrun

import "os"

// Fresh pages are the tools' hidden cost: in the VM this project is
// measured on, a first touch of a 4 KiB page costs 7-10 us (the
// hypervisor fills a shadow page table entry), so a run that grows its
// heap to 90 MB (ipu-plan on qk-early) spends 150-200 ms in page faults,
// more than half its time. A 2 MiB transparent huge page costs one
// fault for 512 of them (80 MB touched: 215 ms in 4 KiB pages, 5 ms in
// huge ones). Linux gives huge pages only to memory advised
// MADV_HUGEPAGE (the hosts' "madvise" mode), and Go maps its heap
// without that advice.
//
// hugeHeap therefore has the runtime map the first HugeHeapBytes of the
// heap with one large allocation it never writes, advises that range
// MADV_HUGEPAGE, and frees it with one collection of the still empty
// heap before the tool starts (2-5 ms): the allocator hands out the
// lowest free pages first, so the run's heap up to that size is made of
// huge pages. The heap beyond it grows in 4 KiB pages as before; the
// collector's settings (gc.go) are unchanged. IPU_HUGEPAGES=0 turns it
// off (the resident set then grows in 4 KiB steps instead of 2 MiB).

// HugeHeapBytes is the size of the heap hugeHeap backs with huge pages.
const HugeHeapBytes = 1 << 30

// hugeHeap advises the first HugeHeapBytes of the heap MADV_HUGEPAGE
// (see above), unless IPU_HUGEPAGES is "0". It reports whether it did.
func hugeHeap() bool {
	if os.Getenv("IPU_HUGEPAGES") == "0" {
		return false
	}
	return adviseHugeHeap(HugeHeapBytes)
}
