package lower

import (
	"sync"

	"ipu.local/libs/prog"
)

// Transfer arrays of moves. Lowering lists an exchange's transfers one
// destination at a time and multicast merges them into an array of its
// own, so the list is garbage as soon as the exchange superstep is made:
// a wide operand's pack makes tens of thousands, and writing them into
// fresh memory on every lowering was a third of the 12-layer encoder's
// pack lowering in the search. The lists are kept for the next ones.
var xferLists sync.Pool

// xferList returns an empty transfer list with room for n.
func xferList(n int) []prog.Transfer {
	if xs, ok := xferLists.Get().(*[]prog.Transfer); ok && cap(*xs) >= n {
		return (*xs)[:0]
	}
	return make([]prog.Transfer, 0, n)
}

// reserve makes room for n more transfers in m's list, from a kept
// list when its own has too little.
func (m *moves) reserve(n int) {
	if cap(m.xfers)-len(m.xfers) >= n {
		return
	}
	xs := xferList(len(m.xfers) + n)
	xs = append(xs, m.xfers...)
	m.recycle()
	m.xfers = xs
}

// recycle keeps m's transfer list for xferList once its exchange is
// made, and empties m's. The lists kept are zero (no buffer held): a
// list's elements past its length never were written.
func (m *moves) recycle() {
	xs := m.xfers
	m.xfers = nil
	if cap(xs) == 0 {
		return
	}
	clear(xs)
	xs = xs[:0]
	xferLists.Put(&xs)
}
