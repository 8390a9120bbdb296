package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"ipu.local/libs/isa"
	"ipu.local/libs/numfmt"
)

// amp executes amph, ampq or ampf; it returns the extra cycle of a
// memory element conflict between the operands.
func (x *exec) amp(c *context, in *inst) (int64, xfault) {
	p := x.m.p
	na, nb := ampBytes(in.op)
	a, b := c.m[in.a&15], c.m[in.b&15]
	offA, offB := a-p.Memory.Lo, b-p.Memory.Lo
	if offA > x.size-na || a&7 != 0 || b < p.Interleaved.Lo || uint64(b)+uint64(nb) > uint64(p.Interleaved.Hi) || b&31 != 0 {
		what := opName(in.op)
		if _, f := x.check(what, a, uint64(na), 8, 0); f.kind != "" {
			return 0, f
		}
		_, f := x.check(what, b, uint64(nb), 32, chkInterleaved)
		return 0, f
	}
	mem := x.mem
	switch in.op {
	case isa.AMPH:
		ampHalf(&c.acc, (*[8]byte)(mem[offA:]), (*[32]byte)(mem[offB:]), x.prog.half)
	case isa.AMPQ:
		ampQuarter(&c.acc, (*[8]byte)(mem[offA:]), (*[32]byte)(mem[offB:]), decodeFP8(c.fp8))
	default:
		ampFloat(&c.acc, (*[16]byte)(mem[offA:]), (*[64]byte)(mem[offB:]))
	}
	c.m[in.a&15] += na
	c.m[in.b&15] += nb
	if x.ampConflict(a, na, b, nb) {
		return 1, xfault{}
	}
	return 0, xfault{}
}

// ampBytes is the bytes an AMP step reads at its operands a and b (and
// adds to their registers): amph and ampq 8 and 32, ampf 16 and 64.
func ampBytes(op isa.Op) (uint32, uint32) {
	if op == isa.AMPF {
		return 16, 64
	}
	return 8, 32
}

// ampQuarter adds the FP8 products of two k (x bytes 0..3 by w bytes
// 0..15, then 4..7 by 16..31), each scaled by 2^(sa+sb), to acc.
func ampQuarter(acc *[64]float32, xb *[8]byte, wb *[32]byte, cfg fp8cfg) {
	scale := cfg.sa + cfg.sb
	xt, wt := &fp8val[cfg.fa], &fp8val[cfg.fb]
	for k := 0; k < 2; k++ {
		var xv [4]float32
		var wv [16]float32
		for i := range xv {
			xv[i] = xt[xb[4*k+i]]
		}
		for j := range wv {
			wv[j] = wt[wb[16*k+j]]
		}
		for i := range xv {
			row := (*[16]float32)(acc[16*i:])
			for j := range wv {
				p := float32(xv[i] * wv[j])
				if scale != 0 {
					p = float32(math.Ldexp(float64(p), scale))
				}
				row[j] = row[j] + p
			}
		}
	}
}

// ampRow executes ampst and ampld.
func (x *exec) ampRow(c *context, in *inst) xfault {
	name := opName(in.op)
	row := in.imm
	if row > 3 {
		return xfault{FaultInvalid, fmt.Sprintf("%s: no accumulator row %d", name, row)}
	}
	addr := c.m[in.a&15]
	acc := c.acc[16*row : 16*row+16]
	if in.op == isa.AMPST {
		off, f := x.check(name, addr, 64, 16, chkInterleaved|chkStore)
		if f.kind != "" {
			return f
		}
		for j, v := range acc {
			binary.LittleEndian.PutUint32(x.mem[off+4*uint32(j):], bits32(v))
		}
		return xfault{}
	}
	off, f := x.check(name, addr, 64, 16, chkInterleaved)
	if f.kind != "" {
		return f
	}
	for j := range acc {
		acc[j] = f32(binary.LittleEndian.Uint32(x.mem[off+4*uint32(j):]))
	}
	return xfault{}
}

// send executes send and send2 on a free port: it copies the words now and
// records the transfer for the exchange resolution.
func (x *exec) send(c *context, in *inst, pc uint32, now int64) xfault {
	name := opName(in.op)
	d, a, cnt := c.m[in.d&15], c.m[in.a&15], c.m[in.b&15]
	b, stride := isa.SendWords(cnt), isa.SendStride(cnt)
	pair := in.op == isa.SEND2
	if pair && b%2 != 0 {
		return xfault{FaultInvalid, fmt.Sprintf("send2 of an odd number of words (%d)", b)}
	}
	lo, n := d&0xFFFF, d>>16
	if n == 0 {
		n = 1
	}
	if last := uint64(lo) + uint64(n-1)*uint64(stride); last >= uint64(x.m.p.Tiles) {
		if stride == 1 {
			return xfault{FaultInvalid, fmt.Sprintf("%s to tiles [%d, %d): the device has %d tiles", name, lo, last+1, x.m.p.Tiles)}
		}
		return xfault{FaultInvalid, fmt.Sprintf("%s to %d tiles from %d every %d (the last %d): the device has %d tiles", name, n, lo, stride, last, x.m.p.Tiles)}
	}
	if b == 0 {
		return xfault{}
	}
	off, f := x.check(name, a, 4*uint64(b), 4, 0)
	if f.kind != "" {
		return f
	}
	r := x.r
	woff := uint32(len(r.sendBytes) / 4)
	r.sendBytes = append(r.sendBytes, x.mem[off:off+4*b]...)
	r.sends = append(r.sends, sendRec{pc: pc, t: now, off: woff, n: b, dstLo: lo, dstN: n, dstStride: stride, pair: pair})
	dur := int64(b)
	if pair {
		dur /= 2
	}
	x.portFree = now + dur
	r.exchBytes += 4 * int64(b)
	return xfault{}
}

// recv arms a listening window.
func (x *exec) recv(c *context, in *inst, pc uint32, now int64) xfault {
	src, a, b := c.m[in.d&15], c.m[in.a&15], c.m[in.b&15]
	if uint64(src) >= uint64(x.m.p.Tiles) {
		return xfault{FaultInvalid, fmt.Sprintf("recv from tile %d: the device has %d tiles", src, x.m.p.Tiles)}
	}
	if b > 0 {
		if _, f := x.check("recv", a, 4*uint64(b), 4, chkStore); f.kind != "" {
			return f
		}
	}
	x.r.recvs = append(x.r.recvs, recvRec{pc: pc, t: now, src: src, addr: a, words: b})
	return xfault{}
}

// hostXfer executes hin and hout; it returns the instruction's cycles.
func (x *exec) hostXfer(c *context, in *inst, pc uint32, now int64) (int64, xfault) {
	name := opName(in.op)
	d, a, b := c.m[in.d&15], c.m[in.a&15], c.m[in.b&15]
	tileAddr, hostAddr := d, a
	if in.op == isa.HOUT {
		tileAddr, hostAddr = a, d
	}
	if tileAddr%4 != 0 || hostAddr%4 != 0 || b%4 != 0 {
		return 0, xfault{FaultAlign, fmt.Sprintf("%s of %d bytes between tile %#x and host %#x: not 4-byte aligned", name, b, tileAddr, hostAddr)}
	}
	per := int64(x.m.p.HostBytesPerIssue)
	cycles := (int64(b) + per - 1) / per
	if cycles < 1 {
		cycles = 1
	}
	if b == 0 {
		return cycles, xfault{}
	}
	r := x.r
	if in.op == isa.HIN {
		off, f := x.check(name, tileAddr, uint64(b), 4, chkStore)
		if f.kind != "" {
			return 0, f
		}
		if err := x.m.readHost(hostAddr, x.mem[off:off+b]); err != nil {
			return 0, xfault{FaultHost, fmt.Sprintf("hin of %d bytes from host %#x: %v", b, hostAddr, err)}
		}
	} else {
		off, f := x.check(name, tileAddr, uint64(b), 4, 0)
		if f.kind != "" {
			return 0, f
		}
		hoff := uint32(len(r.houtData))
		r.houtData = append(r.houtData, x.mem[off:off+b]...)
		r.houts = append(r.houts, houtRec{pc: pc, t: now, hostAddr: hostAddr, off: hoff, n: b})
	}
	r.hostBytes += int64(b)
	return cycles, xfault{}
}

// readHost reads host memory into dst under the host lock, released even
// when dst faults (tile memory whose backing store failed panics here).
func (m *Machine) readHost(addr uint32, dst []byte) error {
	m.hostMu.Lock()
	defer m.hostMu.Unlock()
	if m.host == nil {
		return errors.New("no host attached")
	}
	return m.host.ReadHost(addr, dst)
}

// ampHalf adds the outer product of the 4 FP16 values at xb and the 16 at
// wb to acc: acc[i][j] = acc[i][j] + float32(x[i] * w[j]), the product
// exact. half is halfTable().
func ampHalf(acc *[64]float32, xb *[8]byte, wb *[32]byte, half *[1 << 16]float32) {
	var w [16]float32
	for j := range w {
		w[j] = half[uint16(wb[2*j])|uint16(wb[2*j+1])<<8]
	}
	var x [4]float32
	for i := range x {
		x[i] = half[uint16(xb[2*i])|uint16(xb[2*i+1])<<8]
	}
	mac64(acc, &x, &w)
}

// mac64Go is mac64 in Go: acc[16i+j] = acc[16i+j] + float32(x[i] * w[j]).
func mac64Go(acc *[64]float32, x *[4]float32, w *[16]float32) {
	for i := range x {
		mac16((*[16]float32)(acc[16*i:]), x[i], w)
	}
}

// halfTable returns every FP16 value as FP32 (h16f), indexed by its bits:
// one load per operand instead of a conversion. Built on first use (a
// program with amph), 256 KiB.
var halfTable = sync.OnceValue(func() *[1 << 16]float32 {
	t := new([1 << 16]float32)
	for h := range t {
		t[h] = h16f(uint16(h))
	}
	return t
})

// mac16 is row[j] = row[j] + float32(x * w[j]) (the conversion keeps the
// compiler from fusing the multiply and the add).
func mac16(row *[16]float32, x float32, w *[16]float32) {
	row[0] = row[0] + float32(x*w[0])
	row[1] = row[1] + float32(x*w[1])
	row[2] = row[2] + float32(x*w[2])
	row[3] = row[3] + float32(x*w[3])
	row[4] = row[4] + float32(x*w[4])
	row[5] = row[5] + float32(x*w[5])
	row[6] = row[6] + float32(x*w[6])
	row[7] = row[7] + float32(x*w[7])
	row[8] = row[8] + float32(x*w[8])
	row[9] = row[9] + float32(x*w[9])
	row[10] = row[10] + float32(x*w[10])
	row[11] = row[11] + float32(x*w[11])
	row[12] = row[12] + float32(x*w[12])
	row[13] = row[13] + float32(x*w[13])
	row[14] = row[14] + float32(x*w[14])
	row[15] = row[15] + float32(x*w[15])
}

// ampFloat adds the outer product of the 4 FP32 values at xb and the 16
// at wb to acc, each element rounded once as fma32 rounds it, on the
// values widened once (the products are exact in float64). The
// accumulator keeps a NaN's payload, which every observation of it makes
// canonical (ampst, Snapshot).
func ampFloat(acc *[64]float32, xb *[16]byte, wb *[64]byte) {
	var xv [4]float64
	var wv [16]float64
	for i := range xv {
		xv[i] = float64(f32(binary.LittleEndian.Uint32(xb[4*i:])))
	}
	for j := range wv {
		wv[j] = float64(f32(binary.LittleEndian.Uint32(wb[4*j:])))
	}
	for i, xi := range xv {
		row := (*[16]float32)(acc[16*i:])
		for j, wj := range wv {
			row[j] = float32(numfmt.SumRTO(float64(xi*wj), float64(row[j])))
		}
	}
}

// ampConflict reports whether an 8-byte word of the na bytes at a lies
// in the memory element of one of the nb bytes at b (32-aligned in
// interleaved memory). Consecutive words alternate between the two
// elements of a pair, and b's words cover both elements of every pair
// they touch (a pair boundary is 32-aligned, so it splits them into runs
// of whole 32-byte units): a word conflicts exactly when it lies in
// interleaved memory in one of b's pairs. Pairs under 64 bytes take the
// word-by-word comparison.
func (x *exec) ampConflict(a, na, b, nb uint32) bool {
	p := x.m.p
	if a+na <= p.Interleaved.Lo {
		return false // a lies below interleaved memory, b in it
	}
	pair := 2 * p.ElementBytes
	if pair < 64 {
		for i := uint32(0); i < na; i += 8 {
			for j := uint32(0); j < nb; j += 8 {
				if p.Element(a+i) == p.Element(b+j) {
					return true
				}
			}
		}
		return false
	}
	lo := p.Interleaved.Lo
	b0, b1 := (b-lo)/pair, (b+nb-1-lo)/pair
	for w := a; w < a+na; w += 8 {
		if w >= lo {
			if q := (w - lo) / pair; q == b0 || q == b1 {
				return true
			}
		}
	}
	return false
}
