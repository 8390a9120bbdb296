package device

import (
	"errors"
	"syscall"
)

// Clearing tile memory at power-on. A hole punched in the file clears
// memory without writing it and gives its disk space back, but the file
// system frees every block and cached page in it, and each hole costs a
// call that unmaps its range: on qk-early reloaded (1024 tiles of about
// 14 KB each) the one hole over them took 76 ms of a 130 ms ipu-load,
// and one hole per tile would take longer. When all of a run's data lies
// in the pages the coming load reserves again anyway (its segments'
// pages: a package loaded again), those pages are cleared in place
// instead, which only writes zeros to cached pages; the file system
// says where the data is (SEEK_DATA, SEEK_HOLE). Any data elsewhere,
// and the run is one hole again, so that a smaller package after a
// larger one still gives the larger one's disk space back.

const (
	punchHole        = 0x2 | 0x1 // FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
	seekData         = 3         // SEEK_DATA
	seekHole         = 4         // SEEK_HOLE
	maxDataExtents   = 1 << 16   // past this, a run is punched whole
	extentsPerRunCap = 64        // the extents a run's slice starts with
)

// zeroDirty clears the memory of every dirty tile, run by run of
// consecutive dirty tiles. keep (sorted, disjoint) are the spans the
// coming load reserves: a run whose data all lies in them is cleared in
// place (zeroData), any other is one hole punched, and where the file
// system cannot punch, its tiles are cleared page by page (zeroTile).
func (d *Device) zeroDirty(keep []fileSpan) {
	for t := 0; t < d.g.tiles; {
		if !d.dirty(t) {
			t++
			continue
		}
		end := t + 1
		for end < d.g.tiles && d.dirty(end) {
			end++
		}
		off := int64(d.g.memOffset + uint64(t)*d.g.tileStride)
		n := int64(end-t) * int64(d.g.tileStride)
		if !d.zeroData(off, off+n, keep) {
			if err := syscall.Fallocate(int(d.f.Fd()), punchHole, off, n); err != nil {
				for u := t; u < end; u++ {
					d.zeroTile(u)
				}
			}
		}
		for u := t; u < end; u++ {
			d.m[offDirty+u/8] &^= 1 << (u % 8)
		}
		t = end
	}
}

// zeroData clears the data of the file's bytes [lo, hi) in place when
// keep covers all of it, and reports whether it did: false, having
// changed nothing, when some data lies outside keep, or the file system
// does not tell where the data is, or reports too many extents.
func (d *Device) zeroData(lo, hi int64, keep []fileSpan) bool {
	exts, ok := d.dataExtents(lo, hi)
	if !ok || !covered(exts, keep) {
		return false
	}
	for _, e := range exts {
		d.zeroBytes(e[0], e[1])
	}
	return true
}

// zeroChunk is the zeros zeroBytes writes at a time.
var zeroChunk = make([]byte, 64<<10)

// zeroBytes clears the file's bytes [lo, hi) with writes to the file
// rather than through the mapping: a write to a mapped page first maps
// it in this process, a fault per page (20 us each in a VM, where the
// hypervisor fills its page tables), while a write copies into the page
// cache the mapping shares. Where a write fails, the rest is cleared
// through the mapping.
func (d *Device) zeroBytes(lo, hi int64) {
	for lo < hi {
		n, err := d.writeAt(zeroChunk[:min(int64(len(zeroChunk)), hi-lo)], lo)
		lo += int64(n)
		if err != nil {
			clear(d.m[lo:hi])
			return
		}
	}
}

// covered reports whether the spans (sorted, disjoint) cover every
// extent (sorted, disjoint).
func covered(exts [][2]int64, spans []fileSpan) bool {
	k := 0
	for _, e := range exts {
		for a := e[0]; a < e[1]; {
			for k < len(spans) && spans[k].off+spans[k].n <= a {
				k++
			}
			if k == len(spans) || spans[k].off > a {
				return false
			}
			a = spans[k].off + spans[k].n
		}
	}
	return true
}

// dataExtents returns the extents [start, end) of the file's bytes
// [lo, hi) that hold data, clipped to it. ok is false when the file
// system does not support the query or the extents pass
// maxDataExtents.
func (d *Device) dataExtents(lo, hi int64) (exts [][2]int64, ok bool) {
	fd := int(d.f.Fd())
	exts = make([][2]int64, 0, extentsPerRunCap)
	for pos := lo; pos < hi; {
		a, err := syscall.Seek(fd, pos, seekData)
		if errors.Is(err, syscall.ENXIO) { // no data past pos
			break
		}
		if err != nil || a < pos {
			return nil, false
		}
		if a >= hi {
			break
		}
		b, err := syscall.Seek(fd, a, seekHole)
		if err != nil || b <= a {
			return nil, false
		}
		if len(exts) == maxDataExtents {
			return nil, false
		}
		b = min(b, hi)
		exts = append(exts, [2]int64{a, b})
		pos = b
	}
	return exts, true
}

// zeroTile clears tile t's memory, preferring a hole punched in the file
// (no writes, and the disk space goes back) over clearing the pages.
func (d *Device) zeroTile(t int) {
	off := int64(d.g.memOffset + uint64(t)*d.g.tileStride)
	if err := syscall.Fallocate(int(d.f.Fd()), punchHole, off, int64(d.g.tileStride)); err != nil {
		clear(d.tileMem(t))
	}
	d.m[offDirty+t/8] &^= 1 << (t % 8)
}

// zeroAll clears every tile's memory (one hole punched over all of it),
// leaving the dirty bits for zeroTile when the file system cannot punch.
func (d *Device) zeroAll() {
	n := int64(d.g.tiles) * int64(d.g.tileStride)
	if err := syscall.Fallocate(int(d.f.Fd()), punchHole, int64(d.g.memOffset), n); err != nil {
		for t := 0; t < d.g.tiles; t++ {
			d.setDirty(t)
		}
		return
	}
	clear(d.m[offDirty : offDirty+(d.g.tiles+7)/8])
}
