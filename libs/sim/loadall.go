package sim

import (
	"fmt"

	"ipu.local/libs/arch"
)

// LoadAll is Load of imgs[i] onto tiles[i] for every i, in order, with
// the segments copied and the code predecoded on a worker per core
// (identical code still shares one program). On an error, a *LoadError
// naming the tile, the tiles before the failing one are loaded, as by as
// many Loads.
func (m *Machine) LoadAll(tiles []int, imgs []Image) error {
	if len(tiles) != len(imgs) {
		return fmt.Errorf("load: %d tiles, %d images", len(tiles), len(imgs))
	}
	mems := make([][]byte, len(tiles))
	codes := make([][]arch.Range, len(tiles))
	// A tile loaded twice takes its images in order: copied here, one
	// after the other, not side by side.
	twice := false
	seen := make(map[int]bool, len(tiles))
	for _, t := range tiles {
		twice = twice || seen[t]
		seen[t] = true
	}
	var err error
	n := 0
	for ; n < len(tiles); n++ {
		if mems[n], codes[n], err = m.place(tiles[n], imgs[n], twice); err != nil {
			break
		}
	}
	segs := imgs[:n]
	if twice {
		segs = nil
	}
	progs, bad, werr := m.decodeMany(tiles[:n], mems[:n], codes[:n], segs)
	if werr != nil {
		// The tiles before the one whose image the file refused are
		// loaded; the others placed are not.
		for _, t := range tiles[bad:n] {
			m.tiles[t].active = false
		}
		n, err = bad, werr
	}
	for i, p := range progs[:n] {
		m.tiles[tiles[i]].prog = p
	}
	if err != nil {
		return &LoadError{Tile: tiles[n], Err: err}
	}
	return nil
}

// LoadError is LoadAll's error: the tile whose Load failed, and why.
type LoadError struct {
	Tile int
	Err  error
}

func (e *LoadError) Error() string { return fmt.Sprintf("tile %d: %v", e.Tile, e.Err) }

func (e *LoadError) Unwrap() error { return e.Err }

// decodeMany copies the segments of imgs[i] (none when imgs is nil) into
// mems[i], the memory of tiles[i], and predecodes its code (as
// predecode, sharing through m.progs), for each i on m.parallel()
// workers; with a file (UseFile) it writes the segments to the file and
// decodes from a copy. A panic (a page of the device file that the host
// cannot provide) is raised again in the caller's goroutine, whose guard
// reports it; a write the file refuses is err, for the first such i
// (bad).
func (m *Machine) decodeMany(tiles []int, mems [][]byte, codes [][]arch.Range, imgs []Image) (out []*program, bad int, err error) {
	out = make([]*program, len(mems))
	panics := make([]any, len(mems))
	errs := make([]error, len(mems))
	m.inParts(len(mems), func(i int) {
		defer func() { panics[i] = recover() }()
		decode := func(mem []byte) {
			if len(codes[i]) == 0 {
				out[i] = emptyProgram
				return
			}
			out[i] = m.progs.get(mem, codes[i], func() *program { return m.decodeProgram(mem, codes[i]) })
		}
		switch {
		case imgs == nil:
			decode(mems[i])
		case m.file == nil:
			copySegments(mems[i], m.p.Memory.Lo, imgs[i].Segments)
			decode(mems[i])
		default:
			errs[i] = m.withCodeCopy(func(buf []byte) error { return m.writeImage(tiles[i], imgs[i], codes[i], buf) }, decode)
		}
	})
	for _, p := range panics {
		if p != nil {
			panic(p)
		}
	}
	for i, err := range errs {
		if err != nil {
			return out, i, err
		}
	}
	return out, -1, nil
}

// copySegments copies segments into the memory mem of a tile whose
// memory starts at lo.
func copySegments(mem []byte, lo uint32, segs []Segment) {
	for _, s := range segs {
		copy(mem[s.Addr-lo:], s.Data)
	}
}

// place is Load but for the predecoding: it checks the segments, copies
// them when copySegs is set (else the caller does), and resets the tile,
// and returns the tile's memory and its merged code ranges, for the
// caller to predecode.
func (m *Machine) place(tileIdx int, img Image, copySegs bool) ([]byte, []arch.Range, error) {
	if tileIdx < 0 || tileIdx >= len(m.tiles) {
		return nil, nil, fmt.Errorf("load: tile %d out of range (%d tiles)", tileIdx, len(m.tiles))
	}
	mem, err := m.tileMem(tileIdx)
	if err != nil {
		return nil, nil, fmt.Errorf("load: %w", err)
	}
	var code []arch.Range
	for i, s := range img.Segments {
		end := uint64(s.Addr) + uint64(len(s.Data))
		if s.Addr < m.p.Memory.Lo || end > uint64(m.p.Memory.Hi) {
			return nil, nil, fmt.Errorf("load: tile %d segment %d [%#x, %#x): outside tile memory %s", tileIdx, i, s.Addr, end, hexRange(m.p.Memory))
		}
		if !s.Code {
			continue
		}
		if s.Addr%4 != 0 || len(s.Data)%4 != 0 {
			return nil, nil, fmt.Errorf("load: tile %d code segment %d [%#x, %#x): not 4-byte aligned", tileIdx, i, s.Addr, end)
		}
		if s.Addr < m.p.Executable.Lo || end > uint64(m.p.Executable.Hi) {
			return nil, nil, fmt.Errorf("load: tile %d code segment %d [%#x, %#x): outside executable range %s", tileIdx, i, s.Addr, end, hexRange(m.p.Executable))
		}
		if ex := m.tiles[tileIdx].exec; s.Addr < ex.Lo || end > uint64(ex.Hi) {
			return nil, nil, fmt.Errorf("load: tile %d code segment %d [%#x, %#x): outside the tile's executable range %s set by registers %s and %s", tileIdx, i, s.Addr, end, hexRange(ex), RegName(RegExecLo), RegName(RegExecHi))
		}
		if len(s.Data) > 0 {
			code = append(code, arch.Range{Lo: s.Addr, Hi: uint32(end)})
		}
	}
	if copySegs {
		copySegments(mem, m.p.Memory.Lo, img.Segments)
	}
	t := &m.tiles[tileIdx]
	t.active = true
	t.halted = false
	t.atHsync = false
	t.hsyncReg = 0
	for i := range t.ctx {
		t.ctx[i] = context{fp8: t.fp8Init}
	}
	t.ctx[supCtx].pc = img.Entry
	if t.entrySet {
		t.ctx[supCtx].pc = t.entry
	}
	m.faulted = false
	return mem, mergeRanges(code), nil
}
