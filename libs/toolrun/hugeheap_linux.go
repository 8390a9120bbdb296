package toolrun

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// madvHugepage is Linux's MADV_HUGEPAGE; rlimInfinity its RLIM_INFINITY.
const (
	madvHugepage = 14
	rlimInfinity = ^uint64(0)
)

// thpAdvised reports whether the host gives transparent huge pages to
// advised memory only (its "madvise" mode): in "always" mode the heap
// has them without advice, in "never" mode (or without THP) not at all.
// Under a limit on the address space (RLIMIT_AS) the large mapping could
// be refused, which the runtime reports by ending the process: no advice
// then.
var thpAdvised = sync.OnceValue(func() bool {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &lim); err != nil || lim.Cur != rlimInfinity {
		return false
	}
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	return err == nil && strings.Contains(string(mode), "[madvise]")
})

// availableMemory returns the host's MemAvailable (/proc/meminfo) in
// bytes, 0 when it cannot tell.
func availableMemory() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// adviseHugeHeap maps n bytes of heap, advises them MADV_HUGEPAGE and
// frees them untouched (a fresh span is known zero: nothing writes it),
// on hosts where the advice makes a difference.
func adviseHugeHeap(n int) bool {
	if !thpAdvised() || int64(n) > availableMemory()/2 {
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
