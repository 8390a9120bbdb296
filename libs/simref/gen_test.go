package simref_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"sort"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
	"ipu.local/libs/sim"
)

// The random program generator of the differential test. It writes
// "valid-ish" programs: mostly correct (bounded loops, accesses inside the
// data areas, exchanges scheduled to the cycle), with one deliberate fault
// in some of them.

// Memory layout of every generated tile.
const (
	supCode   = 0x4C000 // supervisor code segment
	wrkCode   = 0x58000 // worker code segment (a second segment: the gap between them is not code)
	dniBase   = 0x60000 // non-interleaved data, dataSize bytes
	dilBase   = 0x90000 // interleaved data, dataSize bytes
	dataSize  = 0x2000
	recvBase  = 0xA0000 // exchange receive buffers
	hostPage  = 1 << 24 // the attached host page
	hostBytes = 64 << 10
	// accessSpan is the range of offsets the generator uses from a data
	// base register; workers shift their bases by up to workerShift.
	accessSpan  = 0x1000
	workerShift = 0x800
	watchdog    = 60000
)

// Register conventions of generated code.
const (
	rDNI  = 8  // $m8: non-interleaved data base
	rDIL  = 9  // $m9: interleaved data base
	rPtr  = 10 // $m10: pointer for post-increment and AMP
	rPtr2 = 11 // $m11: second AMP pointer, rpt count
	rLoop = 12 // $m12: loop counter
	rLink = 13 // $m13: link register
	rTmp  = 14 // $m14: worker pc
)

// fixKind says how an instruction refers to a label.
type fixKind int

const (
	fixNone   fixKind = iota
	fixBranch         // Imm = instruction offset to the label
	fixLo             // Imm = low 16 bits of the label's address
	fixHi             // Imm = high 16 bits of the label's address
)

type item struct {
	in    isa.Inst
	raw   bool // word is a literal word, not an instruction
	word  uint32
	fix   fixKind
	label string
}

// seg is one code segment under construction.
type seg struct {
	base  uint32
	items []item
}

func (s *seg) pc() uint32 { return s.base + 4*uint32(len(s.items)) }

// genTile is one tile's program under construction.
type genTile struct {
	id     int
	sup    seg
	wrk    seg
	labels map[string]uint32
	subs   map[*seg][]func() // subroutines to emit at the end of a segment's current code
	halted bool              // halted in an earlier superstep
}

// program is one generated test case.
type program struct {
	seed     int64
	preset   *arch.Preset
	tiles    []int // active tiles
	images   map[int]sim.Image
	fp8      map[int]uint32
	commands []uint32 // one per Run
	host     []byte   // initial host page
	note     string   // the injected fault, if any
}

// genOptions switch parts of the generator off, to narrow a mismatch down.
type genOptions struct {
	noHost, noExchange, noInject, noWorkers bool
}

// opts is the generator's configuration (the zero value: everything on).
var opts genOptions

type gen struct {
	r      *rand.Rand
	p      *arch.Preset
	tiles  map[int]*genTile
	order  []int
	nlabel int
	// inject is the fault to inject ("" for none); injected reports it
	// was placed.
	inject   string
	injected bool
	note     string
}

// Fault injections: each names one way of getting a program wrong.
var injections = []string{
	"misaligned", "out-of-range", "ld128-nonil", "code-write", "jump-data",
	"invalid-word", "reserved-bits", "worker-only", "supervisor-only", "rpt-branch",
	"put-readonly", "ampst-row", "run-worker7", "send2-odd", "host-page",
	"sync-mismatch", "watchdog", "recv-early", "recv-late", "recv-missing",
	"recv-more", "recv-fewer", "two-senders", "bus", "fetch-gap", "amp-align",
	"worker-loop", "exchange-workers", "send-beyond", "recv-beyond", "recv-cut", "send-busy",
}

// genMode selects the kind of program.
type genMode int

const (
	modeTiny     genMode = iota // 3 or 4 tiles of a tiny preset
	modeWide                    // 6 tiles far apart on a 142-tile chip
	modeExchange                // exchange supersteps only, most with an exchange fault
)

// exchangeInjections are the faults modeExchange programs carry.
var exchangeInjections = []string{"", "recv-early", "recv-late", "recv-missing", "recv-more", "recv-fewer",
	"two-senders", "bus", "exchange-workers", "recv-cut", "send-busy"}

// modeFor spreads seeds over the modes of the normal test.
func modeFor(seed int64) genMode {
	switch {
	case seed%7 == 0:
		return modeWide
	case seed%5 == 0:
		return modeExchange
	}
	return modeTiny
}

func generate(seed int64, mode genMode) *program {
	r := rand.New(rand.NewSource(seed))
	g := &gen{r: r, tiles: map[int]*genTile{}}
	var active []int
	if mode == modeWide {
		// Tiles in three columns apart, so that latencies differ.
		g.p = arch.MustLookup("ipu21").WithTiles("simref-wide", 142)
		active = []int{0, 1, 46, 139, 140, 141}
	} else {
		g.p = arch.MustLookup("ipu21-tiny")
		if r.Intn(4) == 0 {
			g.p = arch.MustLookup("ipu2-tiny")
		}
		active = []int{0, 1, 2, 3}
		if r.Intn(5) == 0 {
			active = []int{0, 1, 3}
		}
	}
	if r.Intn(3) == 0 && !opts.noInject {
		g.inject = injections[r.Intn(len(injections))]
	}
	if mode == modeExchange && !opts.noInject {
		g.inject = exchangeInjections[r.Intn(len(exchangeInjections))]
	}
	for _, id := range active {
		g.tiles[id] = &genTile{id: id, sup: seg{base: supCode}, wrk: seg{base: wrkCode}, labels: map[string]uint32{}, subs: map[*seg][]func(){}}
		g.order = append(g.order, id)
	}
	prog := &program{seed: seed, preset: g.p, tiles: active, images: map[int]sim.Image{}, fp8: map[int]uint32{}}

	steps := 1 + r.Intn(5)
	if mode == modeExchange {
		steps = 2 + r.Intn(3)
	}
	prog.commands = []uint32{r.Uint32()}
	for s := 0; s < steps; s++ {
		last := s == steps-1
		// Which barrier ends this superstep.
		barrier := isa.SYNC
		if !last && r.Intn(4) == 0 {
			barrier = isa.HSYNC
			prog.commands = append(prog.commands, r.Uint32())
		}
		if (r.Intn(3) == 0 || mode == modeExchange) && !opts.noExchange {
			g.exchangeStep()
		} else {
			for _, id := range g.order {
				if t := g.tiles[id]; !t.halted {
					g.computeStep(t)
				}
			}
		}
		mismatch := -1
		if g.want("sync-mismatch") {
			mismatch = g.order[r.Intn(len(g.order))]
			if r.Intn(2) == 0 {
				// Several tiles at hsync, one at sync.
				barrier = isa.HSYNC
			}
		}
		for _, id := range g.order {
			t := g.tiles[id]
			if t.halted {
				continue
			}
			switch {
			case last || (r.Intn(12) == 0 && len(g.order) > 1):
				g.sup(t, isa.Inst{Op: isa.HALT})
				t.halted = true
			case id == mismatch && barrier == isa.SYNC:
				g.sup(t, isa.Inst{Op: isa.HSYNC, D: uint8(r.Intn(8))})
			case id == mismatch || barrier == isa.SYNC:
				g.sup(t, isa.Inst{Op: isa.SYNC})
			default:
				g.sup(t, isa.Inst{Op: isa.HSYNC, D: uint8(r.Intn(8))})
			}
		}
	}
	for _, id := range g.order {
		t := g.tiles[id]
		// A tile that halted early still needs its last superstep ended.
		if !t.halted {
			g.sup(t, isa.Inst{Op: isa.HALT})
		}
		prog.images[id] = g.image(t)
		if r.Intn(2) == 0 {
			prog.fp8[id] = g.randFP8()
		}
	}
	prog.host = make([]byte, hostBytes)
	r.Read(prog.host)
	if g.injected {
		prog.note = g.note
	}
	return prog
}

// want reports whether the fault named kind should be injected now, and
// marks it done.
func (g *gen) want(kind string) bool {
	if g.inject != kind || g.injected || g.r.Intn(2) == 0 {
		return false
	}
	g.injected = true
	g.note = kind
	return true
}

func (g *gen) label() string {
	g.nlabel++
	return fmt.Sprintf("L%d", g.nlabel)
}

func (g *gen) emit(s *seg, in isa.Inst) { s.items = append(s.items, item{in: in}) }
func (g *gen) sup(t *genTile, in isa.Inst) {
	g.emit(&t.sup, in)
}

func (g *gen) mark(t *genTile, s *seg, name string) { t.labels[name] = s.pc() }

func (g *gen) branch(s *seg, in isa.Inst, label string) {
	s.items = append(s.items, item{in: in, fix: fixBranch, label: label})
}

// li loads a 32-bit constant into $m d.
func (g *gen) li(s *seg, d uint8, v uint32) {
	g.emit(s, isa.Inst{Op: isa.LI, D: d, Imm: int32(v & 0xfffff)})
	if v>>20 != 0 {
		g.emit(s, isa.Inst{Op: isa.LIH, D: d, Imm: int32(v >> 16)})
	}
}

// liLabel loads the address of a label into $m d.
func (g *gen) liLabel(s *seg, d uint8, label string) {
	s.items = append(s.items, item{in: isa.Inst{Op: isa.LI, D: d}, fix: fixLo, label: label})
	s.items = append(s.items, item{in: isa.Inst{Op: isa.LIH, D: d}, fix: fixHi, label: label})
}

func (g *gen) image(t *genTile) sim.Image {
	img := sim.Image{Entry: supCode}
	for _, s := range []*seg{&t.sup, &t.wrk} {
		if len(s.items) == 0 {
			continue
		}
		b := make([]byte, 4*len(s.items))
		for k, it := range s.items {
			w := it.word
			if !it.raw {
				in := it.in
				if it.fix != fixNone {
					addr, ok := t.labels[it.label]
					if !ok {
						panic("generator: no label " + it.label)
					}
					switch it.fix {
					case fixBranch:
						in.Imm = int32(addr-(s.base+4*uint32(k)+4)) / 4
					case fixLo:
						in.Imm = int32(addr & 0xffff)
					case fixHi:
						in.Imm = int32(addr >> 16)
					}
				}
				w = isa.MustEncode(in)
			}
			binary.LittleEndian.PutUint32(b[4*k:], w)
		}
		img.Segments = append(img.Segments, sim.Segment{Addr: s.base, Data: b, Code: true})
	}
	dni := make([]byte, dataSize)
	dil := make([]byte, dataSize)
	g.fillData(dni)
	g.fillData(dil)
	img.Segments = append(img.Segments, sim.Segment{Addr: dniBase, Data: dni}, sim.Segment{Addr: dilBase, Data: dil})
	return img
}

// fillData writes words that are interesting as FP32, pairs of FP16 or
// FP8 bytes, with now and then a special value.
func (g *gen) fillData(b []byte) {
	specials := []uint32{0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x3f800000, 0x7c007c00, 0xfc00, 0x7e00, 0x7f7fffff, 0x00000001, 0x80800000}
	for i := 0; i < len(b); i += 4 {
		var w uint32
		switch g.r.Intn(8) {
		case 0:
			w = specials[g.r.Intn(len(specials))]
		case 1:
			w = g.r.Uint32()
		case 2, 3:
			w = math.Float32bits(float32(g.r.NormFloat64() * math.Pow(2, float64(g.r.Intn(40)-20))))
		case 4, 5:
			h := func() uint32 { return uint32(0x3000+g.r.Intn(0x1800)) | uint32(g.r.Intn(2))<<15 }
			w = h() | h()<<16
		default:
			w = math.Float32bits(float32(g.r.Intn(200)-100) / 8)
		}
		binary.LittleEndian.PutUint32(b[i:], w)
	}
}

func (g *gen) randFP8() uint32 {
	v := uint32(g.r.Intn(16)) | uint32(g.r.Intn(64))<<isa.FP8ScaleAShift | uint32(g.r.Intn(64))<<isa.FP8ScaleBShift
	// Mostly small scales, so that values stay in range.
	if g.r.Intn(2) == 0 {
		v = uint32(g.r.Intn(16)) | uint32(g.r.Intn(5)-2)&63<<isa.FP8ScaleAShift | uint32(g.r.Intn(5)-2)&63<<isa.FP8ScaleBShift
	}
	if g.r.Intn(3) == 0 {
		v |= isa.FP8NaNOnOverflow
	}
	return v
}

// ---- Compute supersteps ----

// ctxKind is where generated code runs.
type ctxKind int

const (
	onSup ctxKind = iota
	onWorker
)

// computeStep emits a random compute superstep on t's supervisor.
func (g *gen) computeStep(t *genTile) {
	s := &t.sup
	g.li(s, rDNI, dniBase)
	g.li(s, rDIL, dilBase)
	n := 3 + g.r.Intn(25)
	g.block(t, s, onSup, 0, n)
	if g.r.Intn(3) == 0 {
		g.emit(s, isa.Inst{Op: isa.JOIN})
	}
	g.flushSubs(t, s)
}

// flushSubs jumps over the pending subroutines and emits them.
func (g *gen) flushSubs(t *genTile, s *seg) {
	if len(t.subs[s]) == 0 {
		return
	}
	over := g.label()
	g.branch(s, isa.Inst{Op: isa.BR}, over)
	subs := t.subs[s]
	t.subs[s] = nil
	for _, f := range subs {
		f()
	}
	g.mark(t, s, over)
}

// block emits n random statements.
func (g *gen) block(t *genTile, s *seg, where ctxKind, depth, n int) {
	for i := 0; i < n; i++ {
		g.stmt(t, s, where, depth)
	}
}

func (g *gen) stmt(t *genTile, s *seg, where ctxKind, depth int) {
	r := g.r
	if g.inject != "" && !g.injected && r.Intn(8) == 0 {
		if g.injectCompute(t, s, where, depth) {
			return
		}
	}
	switch k := r.Intn(100); {
	case k < 20:
		g.emit(s, g.aluInst())
	case k < 33:
		g.memStmt(s)
	case k < 50:
		g.floatStmt(s)
	case k < 56:
		g.convStmt(s)
	case k < 61 && depth < 2:
		g.rptStmt(s, where)
	case k < 65 && depth == 0:
		g.loopStmt(t, s, where, depth)
	case k < 69 && depth < 2:
		g.skipStmt(t, s, where, depth)
	case k < 72 && depth == 0:
		g.callStmt(t, s, where)
	case k < 75:
		g.emit(s, isa.Inst{Op: isa.DELAY, Imm: int32(r.Intn(14))})
	case k < 78:
		g.emit(s, isa.Inst{Op: isa.GET, D: uint8(r.Intn(8)), Imm: int32(r.Intn(isa.NumCSR))})
	case k < 87 && where == onWorker:
		g.ampStmt(s)
	case k < 90 && where == onSup && !opts.noHost:
		g.hostStmt(s)
	case k < 97 && where == onSup && depth == 0 && !opts.noWorkers:
		g.runStmt(t, s)
	case k < 99 && where == onSup:
		g.emit(s, isa.Inst{Op: isa.JOIN})
	default:
		g.emit(s, isa.Inst{Op: isa.NOP})
	}
}

// Instructions the generic operand generator handles.
var (
	aluOps   []isa.Op
	floatOps []isa.Op
	convOps  []isa.Op
)

func init() {
	for _, in := range isa.Table() {
		switch {
		case in.Class == isa.ClassALU && in.Op != isa.NOP:
			aluOps = append(aluOps, in.Op)
		case in.Class == isa.ClassFloat:
			floatOps = append(floatOps, in.Op)
		case in.Class == isa.ClassConvert:
			convOps = append(convOps, in.Op)
		}
	}
}

// operands fills the register and immediate fields of op at random: $m
// destinations only $m0..$m7 (the rest hold bases and counters), any
// source.
func (g *gen) operands(op isa.Op) isa.Inst {
	r := g.r
	in := isa.Inst{Op: op}
	info := isa.Lookup(op)
	areg := func(align int) uint8 { return uint8(r.Intn(16/align) * align) }
	for _, k := range info.Operands {
		switch k {
		case isa.MD:
			in.D = uint8(r.Intn(8))
			if r.Intn(20) == 0 {
				in.D = 15
			}
		case isa.MA:
			in.A = uint8(r.Intn(16))
		case isa.MB:
			in.B = uint8(r.Intn(16))
		case isa.MC:
			in.C = uint8(r.Intn(16))
		case isa.AD:
			in.D = areg(1)
		case isa.AA:
			in.A = areg(1)
		case isa.AB:
			in.B = areg(1)
		case isa.AC:
			in.C = areg(1)
		case isa.AD2:
			in.D = areg(2)
		case isa.AA2:
			in.A = areg(2)
		case isa.AB2:
			in.B = areg(2)
		case isa.AC2:
			in.C = areg(2)
		case isa.AD4:
			in.D = areg(4)
		case isa.Imm16:
			in.Imm = int32(r.Intn(1<<16) - 1<<15)
			if r.Intn(2) == 0 {
				in.Imm = int32(r.Intn(64) - 32)
			}
		case isa.Imm16U:
			in.Imm = int32(r.Intn(1 << 16))
		case isa.Imm20:
			in.Imm = int32(r.Intn(1 << 20))
		case isa.Imm8:
			in.Imm = int32(r.Intn(256))
		}
	}
	return in
}

func (g *gen) aluInst() isa.Inst { return g.operands(aluOps[g.r.Intn(len(aluOps))]) }

// memStmt is a load or store inside one of the data areas.
func (g *gen) memStmt(s *seg) {
	r := g.r
	ops := []isa.Op{isa.LDM, isa.STM, isa.LD32, isa.ST32, isa.LD64, isa.ST64, isa.LD128, isa.ST128,
		isa.LDMP, isa.STMP, isa.LD32P, isa.ST32P, isa.LD64P, isa.ST64P, isa.LD128P, isa.ST128P}
	op := ops[r.Intn(len(ops))]
	in := g.memInst(op)
	if in.A == rPtr {
		base := uint8(rDNI)
		if r.Intn(2) == 0 || op == isa.LD128P || op == isa.ST128P {
			base = rDIL
		}
		g.emit(s, isa.Inst{Op: isa.ADDI, D: rPtr, A: base, Imm: int32(accessSpan/4 + 16*r.Intn(accessSpan/32))})
		// The loaded register and the base the same: the base wins.
		if op == isa.LDMP && r.Intn(4) == 0 {
			in.D = rPtr
		}
	}
	g.emit(s, in)
	// Code is readable as data.
	if r.Intn(12) == 0 {
		g.li(s, rPtr, supCode)
		g.emit(s, isa.Inst{Op: isa.LDM, D: uint8(r.Intn(8)), A: rPtr, Imm: int32(4 * r.Intn(32))})
	}
}

// memInst is one access: offset forms from $m8/$m9, post-increment forms
// through $m10, which the caller points into an area.
func (g *gen) memInst(op isa.Op) isa.Inst {
	r := g.r
	in := g.operands(op)
	size := int32(4)
	switch op {
	case isa.LD64, isa.ST64, isa.LD64P, isa.ST64P:
		size = 8
	case isa.LD128, isa.ST128, isa.LD128P, isa.ST128P:
		size = 16
	}
	switch op {
	case isa.LDMP, isa.STMP, isa.LD32P, isa.ST32P, isa.LD64P, isa.ST64P, isa.LD128P, isa.ST128P:
		in.A = rPtr
		in.Imm = max(size, 8) * int32(r.Intn(9)-4)
	default:
		in.A = rDNI
		if size == 16 || r.Intn(2) == 0 {
			in.A = rDIL
		}
		in.Imm = size * int32(r.Intn(accessSpan/int(size)))
	}
	return in
}

// floatStmt loads float data now and then, and computes.
func (g *gen) floatStmt(s *seg) {
	r := g.r
	if r.Intn(4) == 0 {
		op := []isa.Op{isa.LD32, isa.LD64, isa.LD128}[r.Intn(3)]
		g.emit(s, g.memInst(op))
		return
	}
	if r.Intn(8) == 0 {
		in := g.operands(isa.ALI)
		g.emit(s, in)
		g.emit(s, isa.Inst{Op: isa.ALIH, D: in.D, Imm: int32(r.Intn(1 << 16))})
		return
	}
	g.emit(s, g.operands(floatOps[r.Intn(len(floatOps))]))
}

// convStmt converts, sometimes after setting a random fp8 configuration.
func (g *gen) convStmt(s *seg) {
	if g.r.Intn(3) == 0 {
		d := uint8(g.r.Intn(8))
		v := g.randFP8()
		if g.r.Intn(4) == 0 {
			v |= g.r.Uint32() &^ (1<<17 - 1) // undefined bits: put drops them
		}
		g.li(s, d, v)
		g.emit(s, isa.Inst{Op: isa.PUT, A: d, Imm: isa.CSRFP8})
	}
	g.emit(s, g.operands(convOps[g.r.Intn(len(convOps))]))
}

// bodyInst is one instruction allowed in a repeat body.
func (g *gen) bodyInst(where ctxKind) isa.Inst {
	r := g.r
	switch k := r.Intn(10); {
	case k < 3:
		return g.aluInst()
	case k < 5:
		return g.operands(floatOps[r.Intn(len(floatOps))])
	case k < 6:
		return g.operands(convOps[r.Intn(len(convOps))])
	case k < 8:
		ops := []isa.Op{isa.LDMP, isa.STMP, isa.LD32P, isa.ST32P, isa.LD64P, isa.ST64P, isa.LD64, isa.ST32}
		return g.memInst(ops[r.Intn(len(ops))])
	case k < 9 && where == onWorker:
		return isa.Inst{Op: []isa.Op{isa.AMPH, isa.AMPQ, isa.AMPF}[r.Intn(3)], A: rPtr, B: rPtr2}
	}
	return isa.Inst{Op: isa.DELAY, Imm: int32(r.Intn(4))}
}

// rptStmt is a repeat loop of 1..4 instructions.
func (g *gen) rptStmt(s *seg, where ctxKind) {
	r := g.r
	g.emit(s, isa.Inst{Op: isa.ADDI, D: rPtr, A: rDNI, Imm: int32(accessSpan/4 + 16*r.Intn(accessSpan/32))})
	if where == onWorker {
		g.emit(s, isa.Inst{Op: isa.ADDI, D: rPtr2, A: rDIL, Imm: int32(32 * r.Intn(accessSpan/64))})
		g.emit(s, isa.Inst{Op: isa.ADDI, D: rPtr, A: rDIL, Imm: int32(8 * r.Intn(accessSpan/16))})
	}
	n := 1 + r.Intn(4)
	count := r.Intn(5)
	var stream []isa.Inst
	switch r.Intn(12) {
	case 0:
		count, n = 50+r.Intn(200), 1
	case 1:
		n = 0 // an empty body does nothing
	case 2:
		if where == onWorker {
			stream = g.streamBody()
			count, n = 1+r.Intn(40), len(stream)
		}
	}
	if r.Intn(2) == 0 {
		g.emit(s, isa.Inst{Op: isa.RPTI, Imm: int32(count<<8 | n)})
	} else {
		// rpt takes its count from a register; rPtr2 is the AMP pointer
		// on workers, so use a scratch register there.
		cr := uint8(rPtr2)
		if where == onWorker {
			cr = uint8(r.Intn(8))
		}
		g.li(s, cr, uint32(count))
		g.emit(s, isa.Inst{Op: isa.RPT, A: cr, Imm: int32(n)})
	}
	for i := 0; i < n; i++ {
		in := g.bodyInst(where)
		if stream != nil {
			in = stream[i]
		}
		if count >= 50 {
			in = g.operands(floatOps[r.Intn(len(floatOps))])
		}
		// The count register must survive the body only for rpt; the
		// loop state holds the count, so clobbering it is fine.
		g.emit(s, in)
	}
}

// streamBody is a repeat body of the vector-stream shape (ld64p's, then
// an f16v4 fma and/or a max or min). Mostly each of those owns its
// destination pair and reads the loaded pairs, an invariant one or its
// own; now and then its pairs are all at random.
func (g *gen) streamBody() []isa.Inst {
	r := g.r
	pairs := r.Perm(8)
	pair := func(i int) uint8 { return uint8(2 * pairs[i]) }
	var body []isa.Inst
	nld := 1 + r.Intn(2)
	for i := 0; i < nld; i++ {
		in := g.memInst(isa.LD64P)
		in.D = pair(i)
		body = append(body, in)
	}
	src := func() uint8 { return pair(r.Intn(nld + 1)) } // a loaded pair or pair(nld)
	fma := isa.Inst{Op: isa.H4FMA, D: pair(3), A: src(), B: src()}
	mm := isa.Inst{Op: []isa.Op{isa.H4MAX, isa.H4MIN}[r.Intn(2)], D: pair(4), A: pair(4), B: src()}
	if r.Intn(2) == 0 {
		mm.A, mm.B = mm.B, mm.A
	}
	if r.Intn(5) == 0 {
		fma, mm = g.operands(isa.H4FMA), g.operands(mm.Op)
	}
	switch r.Intn(3) {
	case 0:
		return append(body, fma)
	case 1:
		return append(body, mm)
	}
	return append(body, fma, mm)
}

// loopStmt is a counted brnz loop.
func (g *gen) loopStmt(t *genTile, s *seg, where ctxKind, depth int) {
	g.li(s, rLoop, uint32(1+g.r.Intn(4)))
	top := g.label()
	g.mark(t, s, top)
	g.block(t, s, where, depth+1, 1+g.r.Intn(5))
	g.emit(s, isa.Inst{Op: isa.ADDI, D: rLoop, A: rLoop, Imm: -1})
	g.branch(s, isa.Inst{Op: isa.BRNZ, A: rLoop}, top)
}

// skipStmt branches forward over a few statements.
func (g *gen) skipStmt(t *genTile, s *seg, where ctxKind, depth int) {
	over := g.label()
	switch g.r.Intn(3) {
	case 0:
		g.branch(s, isa.Inst{Op: isa.BR}, over)
	case 1:
		g.branch(s, isa.Inst{Op: isa.BRZ, A: uint8(g.r.Intn(8))}, over)
	default:
		g.branch(s, isa.Inst{Op: isa.BRNZ, A: uint8(g.r.Intn(8))}, over)
	}
	g.block(t, s, where, depth+1, 1+g.r.Intn(3))
	g.mark(t, s, over)
}

// callStmt calls a subroutine emitted later.
func (g *gen) callStmt(t *genTile, s *seg, where ctxKind) {
	sub := g.label()
	g.branch(s, isa.Inst{Op: isa.CALL, D: rLink}, sub)
	t.subs[s] = append(t.subs[s], func() {
		g.mark(t, s, sub)
		g.block(t, s, where, 2, 1+g.r.Intn(4))
		g.emit(s, isa.Inst{Op: isa.JR, A: rLink})
	})
}

// ampStmt is an AMP sequence on a worker.
func (g *gen) ampStmt(s *seg) {
	r := g.r
	if r.Intn(3) == 0 {
		g.emit(s, isa.Inst{Op: isa.AMPCLR})
	}
	if r.Intn(3) == 0 {
		d := uint8(r.Intn(8))
		g.li(s, d, g.randFP8())
		g.emit(s, isa.Inst{Op: isa.PUT, A: d, Imm: isa.CSRFP8})
	}
	xBase := uint8(rDIL)
	if r.Intn(2) == 0 {
		xBase = rDNI
	}
	g.emit(s, isa.Inst{Op: isa.ADDI, D: rPtr, A: xBase, Imm: int32(8 * r.Intn(accessSpan/16))})
	g.emit(s, isa.Inst{Op: isa.ADDI, D: rPtr2, A: rDIL, Imm: int32(32 * r.Intn(accessSpan/64))})
	op := []isa.Op{isa.AMPH, isa.AMPQ, isa.AMPF}[r.Intn(3)]
	if k := r.Intn(8); k < 3 {
		g.emit(s, isa.Inst{Op: isa.RPTI, Imm: int32((1+r.Intn(6))<<8 | 1)})
		g.emit(s, isa.Inst{Op: op, A: rPtr, B: rPtr2})
	} else {
		for i := 0; i < 1+r.Intn(3); i++ {
			g.emit(s, isa.Inst{Op: op, A: rPtr, B: rPtr2})
		}
	}
	if r.Intn(10) == 0 {
		// One register for both operands: it advances by 40 (80 with ampf).
		g.emit(s, isa.Inst{Op: isa.ADDI, D: rPtr2, A: rDIL, Imm: int32(32 * r.Intn(accessSpan/64))})
		g.emit(s, isa.Inst{Op: op, A: rPtr2, B: rPtr2})
	}
	for i := 0; i < r.Intn(3); i++ {
		g.emit(s, isa.Inst{Op: isa.ADDI, D: rPtr, A: rDIL, Imm: int32(16 * r.Intn(accessSpan/32))})
		g.emit(s, isa.Inst{Op: []isa.Op{isa.AMPST, isa.AMPLD}[r.Intn(2)], A: rPtr, Imm: int32(r.Intn(4))})
	}
}

// hostStmt copies between the host page and a data area.
func (g *gen) hostStmt(s *seg) {
	r := g.r
	n := uint32(4 * (1 + r.Intn(32)))
	hostAddr := uint32(hostPage + 4*r.Intn((hostBytes-256)/4))
	ha, nr := uint8(r.Intn(4)), uint8(4+r.Intn(4))
	g.li(s, ha, hostAddr)
	g.li(s, nr, n)
	g.emit(s, isa.Inst{Op: isa.ADDI, D: rPtr, A: []uint8{rDNI, rDIL}[r.Intn(2)], Imm: int32(4 * r.Intn(accessSpan/4))})
	if r.Intn(2) == 0 {
		g.emit(s, isa.Inst{Op: isa.HIN, D: rPtr, A: ha, B: nr})
	} else {
		g.emit(s, isa.Inst{Op: isa.HOUT, D: ha, A: rPtr, B: nr})
	}
}

// runStmt starts a worker on freshly generated code.
func (g *gen) runStmt(t *genTile, s *seg) {
	r := g.r
	entry := g.label()
	g.liLabel(s, rTmp, entry)
	arg := uint8(r.Intn(8))
	g.li(s, arg, uint32(0x100*r.Intn(workerShift/0x100+1)))
	w := r.Intn(6)
	g.emit(s, isa.Inst{Op: isa.RUN, A: rTmp, B: arg, Imm: int32(w)})

	ws := &t.wrk
	g.mark(t, ws, entry)
	g.li(ws, rDNI, dniBase)
	g.li(ws, rDIL, dilBase)
	g.emit(ws, isa.Inst{Op: isa.ADD, D: rDNI, A: rDNI, B: 0})
	g.emit(ws, isa.Inst{Op: isa.ADD, D: rDIL, A: rDIL, B: 0})
	g.block(t, ws, onWorker, 0, 2+r.Intn(14))
	g.workerEnd(t, ws)
}

// workerEnd ends a worker's code: exit, then its subroutines.
func (g *gen) workerEnd(t *genTile, ws *seg) {
	g.emit(ws, isa.Inst{Op: isa.EXIT})
	subs := t.subs[ws]
	t.subs[ws] = nil
	for _, f := range subs {
		f()
	}
}

// injectCompute places one deliberate fault in compute code.
func (g *gen) injectCompute(t *genTile, s *seg, where ctxKind, depth int) bool {
	r := g.r
	switch {
	case g.want("misaligned"):
		in := g.memInst([]isa.Op{isa.LDM, isa.ST32, isa.LD64, isa.ST128}[r.Intn(4)])
		in.Imm += int32(1 + r.Intn(3))
		g.emit(s, in)
	case g.want("out-of-range"):
		g.li(s, rPtr, []uint32{0x4BFF8, 0xE7FFC, 0xE8000, 0xFFFFFFF8, 0}[r.Intn(5)])
		g.emit(s, isa.Inst{Op: []isa.Op{isa.LD64P, isa.STMP, isa.LD32P}[r.Intn(3)], D: 2, A: rPtr, Imm: 8})
	case g.want("ld128-nonil"):
		g.emit(s, isa.Inst{Op: isa.LD128, D: 4, A: rDNI, Imm: 64})
	case g.want("code-write"):
		g.li(s, rPtr, supCode+4*uint32(r.Intn(len(s.items)+1)))
		g.emit(s, isa.Inst{Op: isa.ST32, D: 1, A: rPtr, Imm: 0})
	case g.want("jump-data"):
		g.li(s, rPtr, []uint32{dniBase, 0x80000, 0x4C002, 0xE8000}[r.Intn(4)])
		g.emit(s, isa.Inst{Op: isa.JR, A: rPtr})
	case g.want("invalid-word"):
		s.items = append(s.items, item{raw: true, word: 0xFF000000 | r.Uint32()&0xffffff})
	case g.want("reserved-bits"):
		s.items = append(s.items, item{raw: true, word: uint32(isa.NOP)<<24 | 1 + r.Uint32()&0xffff})
	case where == onSup && g.want("worker-only"):
		g.emit(s, isa.Inst{Op: isa.AMPCLR})
	case where == onWorker && g.want("supervisor-only"):
		g.emit(s, isa.Inst{Op: []isa.Op{isa.SYNC, isa.JOIN, isa.SEND}[r.Intn(3)]})
	case g.want("rpt-branch"):
		g.emit(s, isa.Inst{Op: isa.RPTI, Imm: 2<<8 | 2})
		g.emit(s, isa.Inst{Op: isa.NOP})
		g.emit(s, isa.Inst{Op: []isa.Op{isa.BR, isa.RPTI, isa.HALT, isa.EXIT}[r.Intn(4)]})
	case g.want("put-readonly"):
		g.emit(s, isa.Inst{Op: isa.PUT, A: 1, Imm: []int32{0, 1, 2, 4, 5}[r.Intn(5)]})
	case where == onWorker && g.want("ampst-row"):
		g.emit(s, isa.Inst{Op: isa.ADDI, D: rPtr, A: rDIL, Imm: 64})
		g.emit(s, isa.Inst{Op: isa.AMPST, A: rPtr, Imm: int32(4 + r.Intn(250))})
	case where == onWorker && g.want("amp-align"):
		g.emit(s, isa.Inst{Op: isa.ADDI, D: rPtr, A: []uint8{rDIL, rDNI}[r.Intn(2)], Imm: int32(r.Intn(4) * 4)})
		g.emit(s, isa.Inst{Op: isa.ADDI, D: rPtr2, A: []uint8{rDIL, rDNI}[r.Intn(2)], Imm: int32(r.Intn(8) * 4)})
		g.emit(s, isa.Inst{Op: []isa.Op{isa.AMPH, isa.AMPQ, isa.AMPF, isa.AMPST}[r.Intn(4)], A: rPtr, B: rPtr2})
	case where == onSup && depth == 0 && g.want("run-worker7"):
		g.emit(s, isa.Inst{Op: isa.RUN, A: rTmp, B: 0, Imm: int32(6 + r.Intn(3))})
	case where == onSup && g.want("send-beyond"):
		g.li(s, 1, uint32(g.p.Tiles-1)|uint32(2+r.Intn(3))<<16)
		g.li(s, 2, 1)
		g.emit(s, isa.Inst{Op: isa.SEND, D: 1, A: rDNI, B: 2})
	case where == onSup && g.want("recv-beyond"):
		g.li(s, 1, uint32(g.p.Tiles+r.Intn(3)))
		g.li(s, 2, uint32(r.Intn(3)))
		g.emit(s, isa.Inst{Op: isa.RECV, D: 1, A: rDNI, B: 2})
	case where == onSup && g.want("send2-odd"):
		g.li(s, 1, 0)
		g.li(s, 2, 3)
		g.emit(s, isa.Inst{Op: isa.SEND2, D: 1, A: rDNI, B: 2})
	case where == onSup && g.want("host-page"):
		g.li(s, 1, []uint32{0, 2 << 24, hostPage + hostBytes - 4, hostPage + 2}[r.Intn(4)])
		g.li(s, 2, 8)
		g.emit(s, isa.Inst{Op: isa.ADDI, D: rPtr, A: rDIL, Imm: 0})
		if r.Intn(2) == 0 {
			g.emit(s, isa.Inst{Op: isa.HIN, D: rPtr, A: 1, B: 2})
		} else {
			g.emit(s, isa.Inst{Op: isa.HOUT, D: 1, A: rPtr, B: 2})
		}
	case g.want("watchdog"):
		l := g.label()
		g.mark(t, s, l)
		g.branch(s, isa.Inst{Op: isa.BR}, l)
	case where == onWorker && g.want("worker-loop"):
		l := g.label()
		g.mark(t, s, l)
		g.emit(s, isa.Inst{Op: isa.NOP})
		g.branch(s, isa.Inst{Op: isa.BR}, l)
	case g.want("fetch-gap"):
		g.li(s, rPtr, wrkCode-4*uint32(1+r.Intn(4)))
		g.emit(s, isa.Inst{Op: isa.JR, A: rPtr})
	default:
		return false
	}
	return true
}

// ---- Exchange supersteps ----

// event is one send or recv at a fixed cycle on one tile.
type event struct {
	cycle   int64
	op      isa.Op
	d, a, b uint32
	extra   bool // no schedule check (an injected fault)
	pair    bool // a recv of a send2
}

// exchangeStep emits a superstep of scheduled transfers: every tile
// loads the registers of its events, then issues them at the planned
// cycles with delay.
func (g *gen) exchangeStep() {
	r := g.r
	var live []int
	for _, id := range g.order {
		if !g.tiles[id].halted {
			live = append(live, id)
		}
	}
	if len(live) == 0 {
		return
	}
	isLive := map[int]bool{}
	for _, id := range live {
		isLive[id] = true
	}
	events := map[int][]*event{}
	const maxEvents = 4
	// Per tile: the cycle from which the next event may issue (an event
	// at exactly ready, or at ready+6 or later), the send port's free
	// cycle, the end of the last recv window.
	ready := map[int]int64{}
	portFree := map[int]int64{}
	listenEnd := map[int]int64{}
	setup := map[int]int64{}
	for _, id := range live {
		// Worst-case setup: 3 li of up to 2 instructions per event, plus
		// a little random padding before.
		pad := int64(r.Intn(3))
		setup[id] = pad
		ready[id] = 6 * (pad + 6*maxEvents)
	}
	reachable := func(id int, c int64) bool {
		return c == ready[id] || c >= ready[id]+6
	}
	recvAt := 0
	nxfer := 1 + r.Intn(6)
	// Bus slots in use per supertile and cycle: at most two.
	bus := map[int]map[int64]int{}
	busFits := func(src int, ts, dur int64, slots int) bool {
		use := bus[g.p.Supertile(src)]
		for c := ts; c < ts+dur; c++ {
			if use[c]+slots > 2 {
				return false
			}
		}
		return true
	}
	for x := 0; x < nxfer; x++ {
		src := live[r.Intn(len(live))]
		// Destinations: a run of live tiles, consecutive or (now and
		// then) every stride-th.
		first := live[r.Intn(len(live))]
		stride := 1
		if r.Intn(4) == 0 {
			stride = 2 + r.Intn(2)
		}
		ndst := 1
		for ndst < 3 && isLive[first+ndst*stride] && r.Intn(2) == 0 {
			ndst++
		}
		dests := func(yield func(int) bool) {
			for k := 0; k < ndst; k++ {
				if !yield(first + k*stride) {
					return
				}
			}
		}
		double := r.Intn(3) == 0
		words := 1 + r.Intn(8)
		if double {
			words = 2 * (1 + r.Intn(4))
		}
		if r.Intn(5) == 0 {
			words *= 2
		}
		slots := 1
		if double {
			slots = 2
		}
		dur := int64(words)
		if double {
			dur /= 2
		}
		involved := []int{src}
		self := false
		for u := range dests {
			involved = append(involved, u)
			self = self || u == src
		}
		if self {
			// A tile hears itself 10 cycles after its send: closer than
			// two issues, further than one.
			continue
		}
		full := false
		for _, id := range involved {
			if len(events[id]) >= maxEvents-1 {
				full = true
			}
		}
		if full {
			continue
		}
		// The earliest send cycle that every tile can meet.
		ts := portFree[src]
		for ; ; ts++ {
			ok := reachable(src, ts) && busFits(src, ts, dur, slots)
			for u := range dests {
				tr := ts + int64(g.p.Latency(src, u))
				if ok = ok && tr >= listenEnd[u] && reachable(u, tr); !ok {
					break
				}
			}
			if ok {
				break
			}
		}
		srcAddr := uint32(dniBase + 4*r.Intn(accessSpan/4))
		if r.Intn(3) == 0 {
			srcAddr = uint32(dilBase + 4*r.Intn(accessSpan/4))
		}
		op := isa.SEND
		if double {
			op = isa.SEND2
		}
		events[src] = append(events[src], &event{cycle: ts, op: op, d: uint32(first) | uint32(ndst)<<16, a: srcAddr, b: isa.SendCount(words, stride)})
		ready[src] = ts + 6
		portFree[src] = ts + dur
		for u := range dests {
			tr := ts + int64(g.p.Latency(src, u))
			events[u] = append(events[u], &event{cycle: tr, op: isa.RECV, d: uint32(src), a: uint32(recvBase + 0x100*recvAt + 4*r.Intn(16)), b: uint32(words), pair: double})
			recvAt++
			ready[u] = max(ready[u], tr+6)
			listenEnd[u] = tr + dur
		}
		if bus[g.p.Supertile(src)] == nil {
			bus[g.p.Supertile(src)] = map[int64]int{}
		}
		for c := ts; c < ts+dur; c++ {
			bus[g.p.Supertile(src)][c] += slots
		}
	}
	// Now and then an empty send or recv, after the tile's real ones.
	for _, id := range live {
		if r.Intn(6) != 0 || len(events[id]) >= maxEvents {
			continue
		}
		c := max(ready[id]+6, listenEnd[id], portFree[id]) + int64(r.Intn(4))
		op := []isa.Op{isa.SEND, isa.SEND2, isa.RECV}[r.Intn(3)]
		other := uint32(live[r.Intn(len(live))])
		events[id] = append(events[id], &event{cycle: c, op: op, d: other, a: dniBase, b: 0})
		ready[id] = c + 6
	}
	g.injectExchange(events, live)
	// A worker running through the exchange takes slots the schedule
	// counted on.
	chaos := -1
	if g.want("exchange-workers") {
		chaos = live[r.Intn(len(live))]
	}

	for _, id := range live {
		t := g.tiles[id]
		s := &t.sup
		evs := events[id]
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].cycle < evs[j].cycle })
		first := len(s.items)
		if id == chaos {
			g.li(s, rDNI, dniBase)
			g.li(s, rDIL, dilBase)
			g.runStmt(t, s)
		}
		for i := int64(0); i < setup[id]; i++ {
			g.emit(s, isa.Inst{Op: isa.NOP})
		}
		// Registers: three per event, from $m0..$m7 and $m10..$m14.
		regs := []uint8{0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14}
		type regset struct{ d, a, b uint8 }
		var rs []regset
		for k, e := range evs {
			if 3*k+2 >= len(regs) {
				break
			}
			set := regset{regs[3*k], regs[3*k+1], regs[3*k+2]}
			rs = append(rs, set)
			for _, v := range []struct {
				r uint8
				v uint32
			}{{set.d, e.d}, {set.a, e.a}, {set.b, e.b}} {
				g.li(s, v.r, v.v)
			}
		}
		n := int64(len(s.items) - first)
		// Pad to the planned ready cycle, then issue each event on time.
		next := 6 * n
		for k, e := range evs {
			if k >= len(rs) {
				break
			}
			switch {
			case e.cycle == next:
			case e.cycle >= next+6:
				g.emit(s, isa.Inst{Op: isa.DELAY, Imm: int32(e.cycle - next - 6)})
			default:
				// Not reachable (an injected change): issue it as soon
				// as possible.
			}
			g.emit(s, isa.Inst{Op: e.op, D: rs[k].d, A: rs[k].a, B: rs[k].b})
			next = max(e.cycle, next) + 6
		}
		// Sometimes wait for the last word before the barrier (it may
		// also arrive after it).
		if last := listenEnd[id] - 1; r.Intn(2) == 0 && next < last {
			g.emit(s, isa.Inst{Op: isa.DELAY, Imm: int32(max(0, last-next-6))})
		}
	}
}

// injectExchange changes a planned exchange so that it faults.
func (g *gen) injectExchange(events map[int][]*event, live []int) {
	r := g.r
	var recvs, sends []*event
	var recvTile, sendTile []int
	for _, id := range live {
		for _, e := range events[id] {
			if e.op == isa.RECV {
				recvs = append(recvs, e)
				recvTile = append(recvTile, id)
			} else {
				sends = append(sends, e)
				sendTile = append(sendTile, id)
			}
		}
	}
	if len(recvs) == 0 {
		return
	}
	k := r.Intn(len(recvs))
	// Prefer a send2's receiver: one word short, its last pair half
	// finds no listener.
	for i, e := range recvs {
		if e.pair && r.Intn(2) == 0 {
			k = i
		}
	}
	e := recvs[k]
	switch {
	case g.want("recv-early"):
		e.cycle -= int64(1 + r.Intn(3))
	case g.want("recv-late"):
		e.cycle += int64(1 + r.Intn(3))
	case g.want("recv-missing"):
		id := recvTile[k]
		evs := events[id]
		for i := range evs {
			if evs[i] == e {
				events[id] = append(evs[:i:i], evs[i+1:]...)
				break
			}
		}
	case g.want("recv-more"):
		e.b++
	case g.want("recv-cut"):
		// A second recv from the same source while the first still
		// listens ends it early: take the longest window.
		for i, f := range recvs {
			if f.b > e.b {
				k, e = i, f
			}
		}
		id := recvTile[k]
		events[id] = append(events[id], &event{cycle: e.cycle + 6, op: isa.RECV, d: e.d, a: e.a + 0x80, b: e.b, extra: true})
	case g.want("send-busy") && len(sends) > 0:
		// Another send right after the longest: it waits for the port.
		j := 0
		for i, f := range sends {
			if f.b > sends[j].b {
				j = i
			}
		}
		src := sendTile[j]
		events[src] = append(events[src], &event{cycle: sends[j].cycle + 6, op: isa.SEND, d: uint32(src), a: dniBase, b: 2, extra: true})
	case g.want("recv-fewer") && e.b > 1:
		e.b--
	case g.want("two-senders") && len(live) > 1:
		// Another tile sends to the same receiver in the same cycles.
		other := live[r.Intn(len(live))]
		if other == int(e.d) {
			other = live[(indexOf(live, other)+1)%len(live)]
		}
		ts := e.cycle - int64(g.p.Latency(other, recvTile[k]))
		events[other] = append(events[other], &event{cycle: ts, op: isa.SEND, d: uint32(recvTile[k]), a: dniBase, b: e.b, extra: true})
	case g.want("bus") && len(sends) > 0:
		j := r.Intn(len(sends))
		src := sendTile[j]
		partner := src ^ 1
		if indexOf(live, partner) < 0 {
			return
		}
		events[partner] = append(events[partner], &event{cycle: sends[j].cycle, op: isa.SEND2, d: uint32(partner), a: dniBase, b: 4, extra: true})
	}
}

func indexOf(s []int, v int) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
