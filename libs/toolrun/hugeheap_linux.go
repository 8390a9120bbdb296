package toolrun

import (
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
)

// madvHugepage is Linux's MADV_HUGEPAGE.
const madvHugepage = 14

// thpAdvised reports whether the host gives transparent huge pages to
// advised memory only (its "madvise" mode): in "always" mode the heap
// has them without advice, in "never" mode (or without THP) not at all.
var thpAdvised = sync.OnceValue(func() bool {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	return err == nil && strings.Contains(string(mode), "[madvise]")
})

// adviseHugeHeap maps n bytes of heap, advises them MADV_HUGEPAGE and
// frees them untouched (a fresh span is known zero: nothing writes it),
// on hosts where the advice makes a difference.
func adviseHugeHeap(n int) bool {
	if !thpAdvised() {
		return false
	}
	b := make([]byte, n)
	if err := syscall.Madvise(b, madvHugepage); err != nil {
		return false // a kernel without transparent huge pages
	}
	b = nil
	runtime.GC()
	return true
}
