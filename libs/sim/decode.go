package sim

import (
	"sync"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
)

// inst is one predecoded instruction.
type inst struct {
	op         isa.Op
	d, a, b, c uint8
	flags      uint8
	cycles     uint8
	imm        int32
}

// inst flags. A context refuses an instruction whose flags meet its forbid
// mask; the slow path then says why.
const (
	fSupOnly    = 1 << iota // supervisor only
	fWorkerOnly             // workers only
	fNoLoop                 // not allowed inside a repeat body
	fNotCode                // the word is not in a code segment
	fInvalid                // the word does not decode
	fGlobal                 // not run ahead: writes memory, or acts on other contexts or the tile
	fRead                   // reads tile memory (run ahead only up to the read bound)
)

const (
	forbidWorker = fSupOnly | fNotCode | fInvalid
	forbidSup    = fWorkerOnly | fNotCode | fInvalid
)

// program is the predecoded code of one tile: insts[i] is the word at
// base+4i, over the span of the code segments (gaps are fNotCode).
type program struct {
	base  uint32
	insts []inst
	code  []arch.Range // the code segments, sorted, merged
	words []byte       // their words, in order (codeIndex compares them)
	// codeLo, codeHi bound every code segment (equal when there is none).
	codeLo, codeHi uint32
	// distW[i] is the fewest instructions a context starting at insts[i]
	// issues before one that may write memory or start a worker (fGlobal
	// but exit, jr, a word that is not code), distE[i] the same with exit
	// counted: see readBound.
	distW, distE []uint32
	half         *[1 << 16]float32 // halfTable(), when the code has amph or f16v4 arithmetic
	// rep[i] is the number of instructions from insts[i] on that a
	// worker's repeat body may run without the stretch loop (repeatable).
	rep []uint32
	// simple[i] is the number of simple instructions (isSimple) from
	// insts[i] on, at most 255.
	simple []uint8
	// body[i] is the number of instructions from insts[i] on before the
	// next fGlobal one or jr, straight on.
	body []uint32
}

var emptyProgram = &program{}

// predecode decodes the code ranges of mem once; tiles with identical code
// share the result.
func (m *Machine) predecode(mem []byte, code []arch.Range) *program {
	if len(code) == 0 {
		return emptyProgram
	}
	return m.progs.get(mem, code, func() *program { return m.decodeProgram(mem, code) })
}

// decodeProgram predecodes the code ranges (not empty) of mem.
func (m *Machine) decodeProgram(mem []byte, code []arch.Range) *program {
	lo := m.p.Memory.Lo
	base, end := code[0].Lo, code[len(code)-1].Hi
	p := &program{base: base, insts: make([]inst, (end-base)/4), codeLo: base, codeHi: end}
	p.code = append([]arch.Range(nil), code...)
	wc := wordCaches.Get().(*wordCache)
	at := base // the gaps between the segments are not code
	for _, r := range code {
		for a := at; a < r.Lo; a += 4 {
			p.insts[(a-base)/4].flags = fNotCode
		}
		for a := r.Lo; a < r.Hi; a += 4 {
			p.insts[(a-base)/4] = wc.decode(isa.Word(mem[a-lo:]))
		}
		at = r.Hi
	}
	wordCaches.Put(wc)
	p.distW, p.distE = distances(p.insts)
	for i := range p.insts {
		if op := p.insts[i].op; op == isa.AMPH || op >= isa.H4ADD && op <= isa.H4FMA {
			p.half = halfTable()
			break
		}
	}
	p.rep = make([]uint32, len(p.insts))
	for i := len(p.insts) - 1; i >= 0; i-- {
		if !repeatable(&p.insts[i]) {
			continue
		}
		p.rep[i] = 1
		if i+1 < len(p.insts) {
			p.rep[i] += p.rep[i+1]
		}
	}
	p.simple = make([]uint8, len(p.insts))
	for i := len(p.insts) - 1; i >= 0; i-- {
		if !isSimple(&p.insts[i]) {
			continue
		}
		p.simple[i] = 1
		if i+1 < len(p.insts) && p.simple[i+1] < 255 {
			p.simple[i] += p.simple[i+1]
		}
	}
	p.body = make([]uint32, len(p.insts))
	for i := len(p.insts) - 1; i >= 0; i-- {
		in := &p.insts[i]
		if in.flags&(fGlobal|fNotCode|fInvalid) != 0 || in.op == isa.JR {
			continue
		}
		p.body[i] = 1
		if i+1 < len(p.insts) {
			p.body[i] += p.body[i+1]
		}
	}
	return p
}

// wordCache memoizes decodeWord, a function of the word alone: a tile's
// code repeats words (the same kernels' loops), and tiles repeat each
// other's. A cache holds whatever words it last decoded; the pool hands
// one to each decoding goroutine. 2^15 entries (640 KB) against 2^12:
// the 12-layer encoder's ipu-load took 2.47-2.69 s of user CPU against
// 2.83-2.90 (its exchange code has many distinct words), 2.81-2.92 s of
// wall time against 2.94-2.98; 2^16 was no better.
type wordCache [1 << 15]struct {
	w  uint32
	ok bool
	in inst
}

var wordCaches = sync.Pool{New: func() any { return new(wordCache) }}

func (c *wordCache) decode(w uint32) inst {
	e := &c[(w*0x9E3779B1)>>17]
	if !e.ok || e.w != w {
		e.w, e.ok, e.in = w, true, decodeWord(w)
	}
	return e.in
}

func decodeWord(w uint32) inst {
	d, err := isa.Decode(w)
	if err != nil {
		return inst{flags: fInvalid}
	}
	info := isa.Lookup(d.Op)
	in := inst{op: d.Op, d: d.D, a: d.A, b: d.B, c: d.C, imm: d.Imm, cycles: uint8(info.Cycles)}
	switch info.Who {
	case isa.Supervisor:
		in.flags |= fSupOnly
	case isa.Worker:
		in.flags |= fWorkerOnly
	}
	in.flags |= opClass(d)
	switch d.Op {
	case isa.BR, isa.BRZ, isa.BRNZ, isa.CALL, isa.JR, isa.RPT, isa.RPTI,
		isa.RUN, isa.SYNC, isa.HSYNC, isa.HALT, isa.EXIT:
		in.flags |= fNoLoop
	}
	return in
}

// isSimple reports whether runSimple executes in: a one-cycle instruction
// on the context's registers, for any context.
func isSimple(in *inst) bool {
	if in.flags != 0 || in.cycles != 1 {
		return false
	}
	switch in.op {
	case isa.ADD, isa.SUB, isa.MUL, isa.AND, isa.OR, isa.XOR, isa.SHL, isa.SHR, isa.SAR, isa.CMPEQ, isa.CMPLT, isa.CMPULT, isa.MIN, isa.MAX, isa.ADDI, isa.ANDI, isa.ORI, isa.XORI, isa.SHLI, isa.SHRI, isa.SARI, isa.MULI, isa.CMPEQI, isa.CMPLTI, isa.LI, isa.LIH, isa.SORT16LO, isa.SORT16HI, isa.MTA, isa.MFA, isa.AMOV, isa.ALI, isa.ALIH:
		return true
	}
	return false
}

// repeatable reports whether repeatBody may run in: not global, legal in
// a repeat body for a worker, its cycles fixed (not delay, amph, ampq, ampf) and
// not reading the cycle counter (get).
func repeatable(in *inst) bool {
	if in.flags&(fGlobal|fNotCode|fInvalid|fSupOnly|fNoLoop) != 0 {
		return false
	}
	switch in.op {
	case isa.DELAY, isa.GET, isa.AMPH, isa.AMPQ, isa.AMPF:
		return false
	}
	return true
}

// opClass returns fRead for the loads, fGlobal for the instructions that
// cannot run ahead of the other contexts, 0 for those that touch only the
// context's own state.
func opClass(d isa.Inst) uint8 {
	switch d.Op {
	case isa.LDM, isa.LDMP, isa.LD32, isa.LD32P, isa.LD64, isa.LD64P, isa.LD128, isa.LD128P,
		isa.AMPH, isa.AMPQ, isa.AMPF, isa.AMPLD:
		return fRead
	case isa.STM, isa.STMP, isa.ST32, isa.ST32P, isa.ST64, isa.ST64P, isa.ST128, isa.ST128P,
		isa.AMPST, isa.RUN, isa.EXIT, isa.JOIN, isa.SYNC, isa.HSYNC, isa.HALT,
		isa.SEND, isa.SEND2, isa.RECV, isa.HIN, isa.HOUT:
		return fGlobal
	case isa.PUT:
		if d.Imm != isa.CSRFP8 {
			return fGlobal // faults
		}
	}
	return 0
}

// distCap stands for "never": a loop that cannot write.
const distCap = 1 << 30

// distances computes program.distW and distE: a breadth-first search
// from the boundary instructions backwards along the control-flow edges
// (both ways of a conditional branch, the way into and around a repeat
// body and the body's way back), so the result is a lower bound for
// every path. For distW an exit ends every path (it never reaches a
// boundary); for distE it is a boundary. An exit has no edges out either
// way (a decoded exit is global, a boundary), so the two searches share
// one reverse graph.
func distances(insts []inst) (distW, distE []uint32) {
	for i := range insts {
		if in := &insts[i]; in.op == isa.EXIT && !boundary(in) {
			// Not the exit decodeWord makes: the graphs differ.
			return distancesOf(insts, false), distancesOf(insts, true)
		}
	}
	if w, e, ok := sweepDistances(insts); ok {
		return w, e
	}
	g := newReverseGraph(insts, true)
	return g.search(insts, false), g.search(insts, true)
}

// maxSweeps bounds sweepDistances' passes; code whose shortest paths
// take more back edges than that goes to the breadth-first search.
const maxSweeps = 6

// sweepDistances is distances' distW and distE for code whose decoded
// exits are boundaries, by relaxing every edge in passes from the last
// instruction back to the first until the distances are a fixpoint
// (ok), or maxSweeps passes (not ok). The two tables share the graph (an
// exit, a boundary, has no edges out) and differ in their seeds only, so
// a pass relaxes both along each edge. Most edges lead forward, so a
// pass carries every distance along them; each further pass carries
// them over one more back edge (a loop's branch back, a repeat body's
// end to its start). A pass leaves an edge unsatisfied only when its
// target dropped after the edge was relaxed: a back edge's target, or a
// repeat body's end (relaxed from its start while the repeat is
// visited). So a pass that lowers no body's end is a fixpoint when its
// back edges hold, which a check of those edges alone shows, without a
// pass that changes nothing. The relaxations reach the same fixpoint as
// the search, the shortest distances, without building the graph.
func sweepDistances(insts []inst) (distW, distE []uint32, ok bool) {
	n := len(insts)
	w, e := make([]uint32, n), make([]uint32, n)
	for i := range insts {
		w[i], e[i] = distCap, distCap
		if in := &insts[i]; boundary(in) {
			e[i] = 0 // as the searches seed their queues
			if in.op != isa.EXIT {
				w[i] = 0
			}
		}
	}
	// relax lowers i's distances to j's plus one; it reports whether
	// either dropped.
	relax := func(i, j int) bool {
		changed := false
		if d := w[j]; d < distCap && d+1 < w[i] {
			w[i], changed = d+1, true
		}
		if d := e[j]; d < distCap && d+1 < e[i] {
			e[i], changed = d+1, true
		}
		return changed
	}
	// back: the back edges (from, to <= from), gathered by the first
	// pass, the graph being the same every pass.
	var back [][2]int32
	// The edges are enumerated here as newReverseGraph does, inline: a
	// function returning each instruction's edges cost the 12-layer
	// encoder's ipu-load 2 s of CPU more (10.1 s against 8.0 s).
	for sweep := 0; sweep < maxSweeps; sweep++ {
		late := false // a repeat body's end dropped
		for i := n - 1; i >= 0; i-- {
			in := &insts[i]
			if boundary(in) {
				continue
			}
			next, k := successors(in, i)
			for _, j := range next[:k] {
				if j < 0 || j >= n {
					w[i], e[i] = min(w[i], 1), min(e[i], 1) // the next fetch faults
					continue
				}
				relax(i, j)
				if sweep == 0 && j <= i {
					back = append(back, [2]int32{int32(i), int32(j)})
				}
			}
			if in.op == isa.RPT || in.op == isa.RPTI {
				if body := rptBody(in); body > 0 && i+body < n {
					late = relax(i+body, i+1) || late
				}
			}
		}
		if late {
			continue
		}
		holds := true
		for _, b := range back {
			if relax(int(b[0]), int(b[1])) {
				holds = false
			}
		}
		if holds {
			return w, e, true
		}
	}
	return nil, nil, false
}

// distancesOf computes distW (exit false) or distE (exit true) alone.
func distancesOf(insts []inst, exit bool) []uint32 {
	return newReverseGraph(insts, exit).search(insts, exit)
}

// boundary reports whether a search starts at in: an instruction that
// may write memory or start a worker, a word that is not code, or jr.
func boundary(in *inst) bool {
	return in.flags&(fGlobal|fNotCode|fInvalid) != 0 || in.op == isa.JR
}

// reverseGraph is the control-flow edges reversed, in compressed form:
// preds[start[j]:start[j+1]] lead to j; faults are the instructions
// whose next fetch faults (distance 1).
type reverseGraph struct {
	start, preds []int32
	faults       []bool
}

// newReverseGraph builds the graph of distancesOf(insts, exit): without
// exit, an exit has no edges out.
func newReverseGraph(insts []inst, exit bool) *reverseGraph {
	n := len(insts)
	g := &reverseGraph{start: make([]int32, n+1), faults: make([]bool, n)}
	edges := make([][2]int32, 0, n+n/4) // {from, to}
	for i := range insts {
		in := &insts[i]
		if in.op == isa.EXIT && !exit || boundary(in) {
			continue
		}
		next, k := successors(in, i)
		for _, j := range next[:k] {
			if j < 0 || j >= n {
				g.faults[i] = true
				continue
			}
			edges = append(edges, [2]int32{int32(i), int32(j)})
		}
		if in.op == isa.RPT || in.op == isa.RPTI {
			if body := rptBody(in); body > 0 && i+body < n {
				edges = append(edges, [2]int32{int32(i + body), int32(i + 1)})
			}
		}
	}
	for _, e := range edges {
		g.start[e[1]+1]++
	}
	for j := 0; j < n; j++ {
		g.start[j+1] += g.start[j]
	}
	g.preds = make([]int32, len(edges))
	fill := append([]int32(nil), g.start[:n]...)
	for _, e := range edges {
		g.preds[fill[e[1]]] = e[0]
		fill[e[1]]++
	}
	return g
}

// search returns the distances from the boundaries (with exit: the
// exits too) over g.
func (g *reverseGraph) search(insts []inst, exit bool) []uint32 {
	n := len(insts)
	dist := make([]uint32, n)
	queue := make([]int32, 0, n)
	for i := range insts {
		in := &insts[i]
		dist[i] = distCap
		switch {
		case in.op == isa.EXIT && !exit:
		case boundary(in):
			dist[i] = 0
			queue = append(queue, int32(i))
		case g.faults[i]:
			dist[i] = 1 // the next fetch faults
		}
	}
	// Seeds at 1 (a fetch fault next) join the queue after the zeros.
	for i := range dist {
		if dist[i] == 1 {
			queue = append(queue, int32(i))
		}
	}
	for q := 0; q < len(queue); q++ {
		j := queue[q]
		for _, i := range g.preds[g.start[j]:g.start[j+1]] {
			if d := dist[j] + 1; d < dist[i] {
				dist[i] = d
				queue = append(queue, i)
			}
		}
	}
	return dist
}

// successors returns the k instruction indices that may follow insts[i]
// (outside [0, len) when the fetch would fault), without allocating.
func successors(in *inst, i int) (next [2]int, k int) {
	switch in.op {
	case isa.BR, isa.CALL:
		return [2]int{i + 1 + int(in.imm)}, 1
	case isa.BRZ, isa.BRNZ:
		return [2]int{i + 1, i + 1 + int(in.imm)}, 2
	case isa.RPT, isa.RPTI:
		return [2]int{i + 1, i + 1 + rptBody(in)}, 2
	}
	return [2]int{i + 1}, 1
}

// rptBody is the body length of rpt or rpti in instructions.
func rptBody(in *inst) int {
	if in.op == isa.RPT {
		return int(uint32(in.imm))
	}
	return int(uint32(in.imm) & 0xFF)
}

// overlapsCode reports whether [addr, addr+n) overlaps a code segment.
func (p *program) overlapsCode(addr, n uint32) bool {
	end := uint64(addr) + uint64(n)
	if n == 0 || end <= uint64(p.codeLo) || addr >= p.codeHi {
		return false
	}
	for _, r := range p.code {
		if end > uint64(r.Lo) && addr < r.Hi {
			return true
		}
	}
	return false
}
