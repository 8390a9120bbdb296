package toolrun

import (
	"runtime"
	"syscall"
)

// madvHugepage is Linux's MADV_HUGEPAGE.
const madvHugepage = 14

// adviseHugeHeap maps n bytes of heap, advises them MADV_HUGEPAGE and
// frees them untouched (a fresh span is known zero: nothing writes it).
func adviseHugeHeap(n int) bool {
	b := make([]byte, n)
	if err := syscall.Madvise(b, madvHugepage); err != nil {
		return false // a kernel without transparent huge pages
	}
	b = nil
	runtime.GC()
	return true
}
