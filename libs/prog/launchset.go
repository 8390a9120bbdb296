package prog

import "sync/atomic"

// LaunchSet is a set of (tile, kernel) launches, for walking a
// program's launches once each. Kernels carry the set's mark, so that
// adding one is no map operation unless the kernel is launched on more
// than one tile. A kernel is in at most one live set at a time: the
// sets of one goroutine's programs, one after the other.
type LaunchSet struct {
	epoch uint64
	multi map[launch]bool
}

type launch struct {
	t int
	k *Kernel
}

var epochs atomic.Uint64

// NewLaunchSet returns an empty set.
func NewLaunchSet() *LaunchSet { return &LaunchSet{epoch: epochs.Add(1)} }

// Add adds kernel k's launch on tile t and reports whether it was new.
func (s *LaunchSet) Add(t int, k *Kernel) bool {
	switch {
	case k.setEpoch != s.epoch:
		k.setEpoch, k.setTile = s.epoch, t
		return true
	case k.setTile == t:
		return false
	}
	if s.multi == nil {
		s.multi = map[launch]bool{}
	}
	if k.setTile >= 0 {
		s.multi[launch{k.setTile, k}] = true
		k.setTile = -1
	}
	if s.multi[launch{t, k}] {
		return false
	}
	s.multi[launch{t, k}] = true
	return true
}
