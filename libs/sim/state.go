package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"ipu.local/libs/arch"
)

// The state blob (MarshalState), little-endian:
//
//	magic    [4]byte "ISIM"
//	version  u8 = 2
//	tiles    u32 (must equal the preset's)
//	mark     u64
//	watchdog u64
//	faulted  u8
//	tile     [tiles]:
//	    flags   u8   bit 0 active, 1 halted, 2 at hsync, 3 in the sync group,
//	                 4 in the exchange
//	    fp8Init u32
//	    execLo, execHi u32 (the executable range registers)
//	    (only when active:)
//	    hsyncReg u8
//	    ncode    u32, code [ncode]{lo, hi u32}
//	    context  [7]{m [16]u32, a [16]u32, pc u32, fp8 u32,
//	                 flags u8 (bit 0 running, 1 loop), loopStart, loopEnd, loopRem u32,
//	                 acc [64]u32 (workers only)}
//
// An inactive tile has no other state: its contexts are zero but for CSR
// fp8 = fp8Init.
const (
	stateMagic   = "ISIM"
	stateVersion = 2
)

const (
	tileActive = 1 << iota
	tileHalted
	tileAtHsync
	tileInSync
	tileInXchg
)

// MarshalState returns everything but memory: the configuration, every
// tile's contexts and code ranges, the mark.
func (m *Machine) MarshalState() []byte {
	b := make([]byte, 0, m.stateSize())
	b = append(b, stateMagic...)
	b = append(b, stateVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m.tiles)))
	b = binary.LittleEndian.AppendUint64(b, uint64(m.mark))
	b = binary.LittleEndian.AppendUint64(b, uint64(m.watchdog))
	b = append(b, b2byte(m.faulted))
	for i := range m.tiles {
		t := &m.tiles[i]
		var fl byte
		if t.active {
			fl |= tileActive
		}
		if t.halted {
			fl |= tileHalted
		}
		if t.atHsync {
			fl |= tileAtHsync
		}
		if t.inSync {
			fl |= tileInSync
		}
		if t.inXchg {
			fl |= tileInXchg
		}
		b = append(b, fl)
		b = binary.LittleEndian.AppendUint32(b, t.fp8Init)
		b = binary.LittleEndian.AppendUint32(b, t.exec.Lo)
		b = binary.LittleEndian.AppendUint32(b, t.exec.Hi)
		if !t.active {
			continue
		}
		b = append(b, t.hsyncReg)
		var code []arch.Range
		if t.prog != nil {
			code = t.prog.code
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(len(code)))
		for _, r := range code {
			b = binary.LittleEndian.AppendUint32(b, r.Lo)
			b = binary.LittleEndian.AppendUint32(b, r.Hi)
		}
		for k := range t.ctx {
			c := &t.ctx[k]
			for _, v := range c.m {
				b = binary.LittleEndian.AppendUint32(b, v)
			}
			for _, v := range c.a {
				b = binary.LittleEndian.AppendUint32(b, v)
			}
			b = binary.LittleEndian.AppendUint32(b, c.pc)
			b = binary.LittleEndian.AppendUint32(b, c.fp8)
			b = append(b, b2byte(c.running)|b2byte(c.loopOn)<<1)
			b = binary.LittleEndian.AppendUint32(b, c.loopStart)
			b = binary.LittleEndian.AppendUint32(b, c.loopEnd)
			b = binary.LittleEndian.AppendUint32(b, c.loopRem)
			if k < numWorkers {
				for _, v := range c.acc {
					b = binary.LittleEndian.AppendUint32(b, bits32(v))
				}
			}
		}
	}
	return b
}

// stateSize is the length of MarshalState's blob, so that it is built
// without growing (a full chip's active tiles make megabytes).
func (m *Machine) stateSize() int {
	const (
		head    = len(stateMagic) + 1 + 4 + 8 + 8 + 1
		perTile = 1 + 4 + 4 + 4
		perCtx  = 16*4 + 16*4 + 4 + 4 + 1 + 3*4
		active  = 1 + 4 + numCtx*perCtx + numWorkers*64*4
	)
	n := head + len(m.tiles)*perTile
	for i := range m.tiles {
		t := &m.tiles[i]
		if !t.active {
			continue
		}
		n += active
		if t.prog != nil {
			n += 8 * len(t.prog.code)
		}
	}
	return n
}

// predecodeAll predecodes the code of every active tile from the current
// memory, on m.parallel() workers, tiles with identical code sharing one
// program (whichever worker decodes it first: the programs are equal).
// It returns the programs by code, for later loads.
func (m *Machine) predecodeAll(tiles []tile, codes [][]arch.Range) (*codeIndex, error) {
	mems := make([][]byte, len(tiles))
	for i := range tiles {
		if !tiles[i].active {
			continue
		}
		mem, err := m.tileMem(i)
		if err != nil {
			return nil, err
		}
		mems[i] = mem
	}
	progs := newCodeIndex(m.p.Memory.Lo)
	workers := max(1, min(m.parallel(), len(tiles)))
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(tiles); i += workers {
				if mems[i] == nil {
					continue
				}
				if len(codes[i]) == 0 {
					tiles[i].prog = emptyProgram
					continue
				}
				p := progs.get(mems[i], codes[i], func() *program { return m.decodeProgram(mems[i], codes[i]) })
				tiles[i].prog = p
			}
		}()
	}
	wg.Wait()
	return progs, nil
}

func b2byte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// stateReader reads the blob, remembering the first error.
type stateReader struct {
	b   []byte
	off int
	err error
}

func (r *stateReader) need(n int, what string) bool {
	if r.err != nil {
		return false
	}
	if len(r.b)-r.off < n {
		r.err = fmt.Errorf("%s at byte %d: truncated (%d bytes left, need %d)", what, r.off, len(r.b)-r.off, n)
		return false
	}
	return true
}

func (r *stateReader) u8(what string) uint8 {
	if r.err == nil && r.off < len(r.b) {
		v := r.b[r.off]
		r.off++
		return v
	}
	r.need(1, what)
	return 0
}

func (r *stateReader) u32(what string) uint32 {
	if r.err == nil && len(r.b)-r.off >= 4 {
		v := binary.LittleEndian.Uint32(r.b[r.off:])
		r.off += 4
		return v
	}
	r.need(4, what)
	return 0
}

func (r *stateReader) u64(what string) uint64 {
	if !r.need(8, what) {
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

func (r *stateReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: %s", r.off, fmt.Sprintf(format, args...))
	}
}

// Bytes of a saved context: registers, pc and fp8, the flags byte, the
// repeat loop, then (a worker's) the accumulator.
const (
	ctxFixedBytes = 4*(16+16+2) + 1 + 4*3
	ctxAccBytes   = 4 * 64
)

// useFieldReads makes context read every context field by field, as
// when its bytes run short (a test compares the two ways).
var useFieldReads = false

// context reads context k of tile i from its bytes at once when they are
// all there, with the checks and errors (their byte offsets included) of
// reading them field by field; it reports false, having read nothing,
// when they are not, or after an error, for the caller's field reads.
// (Field by field, the 1472 tiles' contexts were 7 ms of qk-early's
// ipu-check.)
func (r *stateReader) context(i, k int, c *context) bool {
	n := ctxFixedBytes
	if k < numWorkers {
		n += ctxAccBytes
	}
	if useFieldReads || r.err != nil || len(r.b)-r.off < n {
		return false
	}
	le := binary.LittleEndian
	base := r.off
	b := r.b[base : base+n]
	for j := range c.m {
		c.m[j] = le.Uint32(b[4*j:])
	}
	for j := range c.a {
		c.a[j] = le.Uint32(b[64+4*j:])
	}
	c.pc, c.fp8 = le.Uint32(b[128:]), le.Uint32(b[132:])
	if c.fp8&^fp8Mask != 0 {
		r.off = base + 136
		r.fail("tile %d context %d: fp8 %#x has undefined bits", i, k, c.fp8)
		return true
	}
	cf := b[136]
	if cf > 3 || k == supCtx && cf&1 != 0 {
		r.off = base + 137
		r.fail("tile %d context %d: bad flags %#x", i, k, cf)
		return true
	}
	c.running, c.loopOn = cf&1 != 0, cf&2 != 0
	c.loopStart, c.loopEnd, c.loopRem = le.Uint32(b[137:]), le.Uint32(b[141:]), le.Uint32(b[145:])
	if c.m[15] != 0 || c.a[15] != 0 {
		r.off = base + ctxFixedBytes
		r.fail("tile %d context %d: zero register set", i, k)
		return true
	}
	if k < numWorkers {
		for j := range c.acc {
			v := le.Uint32(b[ctxFixedBytes+4*j:])
			if f := f32(v); f != f && v != qnan32 {
				r.off = base + ctxFixedBytes + 4*(j+1)
				r.fail("tile %d context %d: accumulator NaN %#x is not canonical", i, k, v)
				return true
			}
			c.acc[j] = f32(v)
		}
	}
	r.off = base + n
	return true
}

// UnmarshalState restores what MarshalState saved, validating every
// field, and predecodes the code from the current memory. On error the
// machine is unchanged.
func (m *Machine) UnmarshalState(b []byte) error {
	if len(b) < len(stateMagic)+1 || string(b[:len(stateMagic)]) != stateMagic {
		return errors.New("simulator state: bad magic")
	}
	if v := b[len(stateMagic)]; v != stateVersion {
		return fmt.Errorf("simulator state: unknown version %d (want %d)", v, stateVersion)
	}
	r := &stateReader{b: b, off: len(stateMagic) + 1}
	n := r.u32("tile count")
	if r.err == nil && uint64(n) != uint64(len(m.tiles)) {
		return fmt.Errorf("simulator state: %d tiles, preset %s has %d", n, m.p.Name, len(m.tiles))
	}
	mark := r.u64("mark")
	if mark > math.MaxInt32 {
		r.fail("mark %d out of range", mark)
	}
	wd := r.u64("watchdog")
	if r.err == nil && (wd == 0 || wd > DefaultWatchdog) {
		r.fail("watchdog %d out of range", wd)
	}
	faulted := r.u8("faulted")
	if faulted > 1 {
		r.fail("faulted flag %d", faulted)
	}
	tiles := make([]tile, len(m.tiles))
	codes := make([][]arch.Range, len(m.tiles))
	for i := 0; i < len(tiles) && r.err == nil; i++ {
		t := &tiles[i]
		fl := r.u8("tile flags")
		if fl&^(tileActive|tileHalted|tileAtHsync|tileInSync|tileInXchg) != 0 || fl&tileActive == 0 && fl&^(tileInSync|tileInXchg) != 0 {
			r.fail("tile %d: bad flags %#x", i, fl)
		}
		t.active, t.halted, t.atHsync = fl&tileActive != 0, fl&tileHalted != 0, fl&tileAtHsync != 0
		t.inSync, t.inXchg = fl&tileInSync != 0, fl&tileInXchg != 0
		t.fp8Init = r.u32("fp8")
		if t.fp8Init&^fp8Mask != 0 {
			r.fail("tile %d: fp8 %#x has undefined bits", i, t.fp8Init)
		}
		t.exec = arch.Range{Lo: r.u32("exec lo"), Hi: r.u32("exec hi")}
		if r.err == nil && (t.exec.Lo%4 != 0 || t.exec.Hi%4 != 0 || t.exec.Lo < m.p.Executable.Lo || t.exec.Hi > m.p.Executable.Hi) {
			r.fail("tile %d: executable range [%#x, %#x) outside %s", i, t.exec.Lo, t.exec.Hi, hexRange(m.p.Executable))
		}
		if !t.active {
			for k := range t.ctx {
				t.ctx[k].fp8 = t.fp8Init
			}
			continue
		}
		t.hsyncReg = r.u8("hsync register")
		if t.hsyncReg > 15 {
			r.fail("tile %d: hsync register %d", i, t.hsyncReg)
		}
		nc := r.u32("code range count")
		if !r.need(int(min(nc, 1<<20))*8, "code ranges") {
			break
		}
		var code []arch.Range
		for j := uint32(0); j < nc; j++ {
			c := arch.Range{Lo: r.u32("code lo"), Hi: r.u32("code hi")}
			if c.Lo >= c.Hi || c.Lo%4 != 0 || c.Hi%4 != 0 || !t.exec.Contains(c.Lo, c.Hi-c.Lo) ||
				len(code) > 0 && c.Lo <= code[len(code)-1].Hi {
				r.fail("tile %d: bad code range %d [%#x, %#x)", i, j, c.Lo, c.Hi)
				break
			}
			code = append(code, c)
		}
		codes[i] = code
		for k := range t.ctx {
			if r.context(i, k, &t.ctx[k]) {
				continue
			}
			c := &t.ctx[k]
			for j := range c.m {
				c.m[j] = r.u32("register")
			}
			for j := range c.a {
				c.a[j] = r.u32("register")
			}
			c.pc = r.u32("pc")
			c.fp8 = r.u32("fp8")
			if c.fp8&^fp8Mask != 0 {
				r.fail("tile %d context %d: fp8 %#x has undefined bits", i, k, c.fp8)
			}
			cf := r.u8("context flags")
			if cf > 3 || k == supCtx && cf&1 != 0 {
				r.fail("tile %d context %d: bad flags %#x", i, k, cf)
			}
			c.running, c.loopOn = cf&1 != 0, cf&2 != 0
			c.loopStart, c.loopEnd, c.loopRem = r.u32("loop start"), r.u32("loop end"), r.u32("loop count")
			if c.m[15] != 0 || c.a[15] != 0 {
				r.fail("tile %d context %d: zero register set", i, k)
			}
			if k < numWorkers {
				for j := range c.acc {
					v := r.u32("accumulator")
					if f := f32(v); f != f && v != qnan32 {
						r.fail("tile %d context %d: accumulator NaN %#x is not canonical", i, k, v)
					}
					c.acc[j] = f32(v)
				}
			}
		}
	}
	if r.err == nil && r.off != len(b) {
		r.fail("%d trailing bytes", len(b)-r.off)
	}
	if r.err != nil {
		return fmt.Errorf("simulator state: %w", r.err)
	}
	progs, err := m.predecodeAll(tiles, codes)
	if err != nil {
		return fmt.Errorf("simulator state: %w", err)
	}
	m.progs = progs
	m.tiles = tiles
	m.mark = int(mark)
	m.watchdog = int64(wd)
	m.faulted = faulted == 1
	return nil
}
