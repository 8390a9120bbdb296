package sched

import (
	"math/bits"
	"slices"
)

// distinctSet counts the distinct non-zero values of lists, its table
// kept from list to list: an open-addressing set whose slots hold the
// generation that filled them, so that a new list clears nothing.
type distinctSet struct {
	keys, gens []uint32
	gen        uint32
}

// sortedMax is the longest list counted by sorting: shorter ones sort
// faster than they hash.
const sortedMax = 32

// count returns the distinct non-zero values of vs, which it may reorder.
func (s *distinctSet) count(vs []uint32) int64 {
	var n int64
	if len(vs) <= sortedMax {
		slices.Sort(vs)
		for i, v := range vs {
			if v != 0 && (i == 0 || vs[i-1] != v) {
				n++
			}
		}
		return n
	}
	shift := 32 - bits.Len(uint(2*len(vs)-1)) // the table: the power of two at least 2 len(vs)
	size := 1 << (32 - shift)
	if len(s.keys) < size {
		s.keys, s.gens, s.gen = make([]uint32, size), make([]uint32, size), 0
	}
	if s.gen++; s.gen == 0 { // wrapped: every slot's generation is stale but might match
		clear(s.gens)
		s.gen = 1
	}
	mask := uint32(size - 1)
	for _, v := range vs {
		if v == 0 {
			continue
		}
		h := (v * 0x9E3779B1) >> shift
		for {
			if s.gens[h] != s.gen {
				s.gens[h], s.keys[h] = s.gen, v
				n++
				break
			}
			if s.keys[h] == v {
				break
			}
			h = (h + 1) & mask
		}
	}
	return n
}
