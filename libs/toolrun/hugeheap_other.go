//go:build !linux

package toolrun

// adviseHugeHeap does nothing where Linux's MADV_HUGEPAGE does not exist.
func adviseHugeHeap(int) bool { return false }

// availableMemory is 0: no advice is given.
func availableMemory() int64 { return 0 }
