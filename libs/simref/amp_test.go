package simref_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
	"ipu.local/libs/numfmt"
	"ipu.local/libs/simref"
)

// TestAMP runs one amph and one ampq step on worker 0 and checks the
// accumulator rows it stores, and the cycle cost of an element conflict.
func TestAMP(t *testing.T) {
	const wpc = codeBase + 4*7
	sup := newProg().
		li(m1, wpc).           // 0, 6
		li(m2, dataBase).      // 12, 18
		r(isa.RUN, 0, m1, m2). // 24
		op(isa.JOIN).
		op(isa.HALT)
	if got := len(sup.insts); got != 7 {
		t.Fatalf("supervisor is %d instructions, worker address assumes 7", got)
	}
	worker := newProg().
		i(isa.ADDI, m1, m0, 0x20).
		i(isa.ADDI, m3, m0, 0x100).
		op(isa.AMPCLR).
		r(isa.AMPH, 0, m0, m1).
		add(isa.AMPST, 0, m3, 0, 0, 1).
		op(isa.AMPCLR).
		i(isa.LI, m4, 0, int32(2<<isa.FP8FormatBShift|signedField(-1)<<isa.FP8ScaleAShift)).
		add(isa.PUT, 0, m4, 0, 0, isa.CSRFP8).
		r(isa.AMPQ, 0, m0, m1).
		i(isa.ADDI, m5, m3, 0x40).
		add(isa.AMPST, 0, m5, 0, 0, 2).
		op(isa.EXIT)
	sup.insts = append(sup.insts, worker.insts...)

	p := arch.MustLookup("ipu21-tiny")
	mem := memories(p)
	m := simref.New(p, func(i int) []byte { return mem[i] })
	if err := m.Load(0, sup.image()); err != nil {
		t.Fatal(err)
	}
	d := mem[0][dataBase-p.Memory.Lo:]
	// amph: x = 1, 2, 3, 4 at dataBase; w = 1..16 at dataBase+0x20 (same
	// element: one more cycle).
	for i := 0; i < 4; i++ {
		binary.LittleEndian.PutUint16(d[2*i:], numfmt.F32ToF16(math.Float32bits(float32(i+1))))
	}
	for j := 0; j < 16; j++ {
		binary.LittleEndian.PutUint16(d[0x20+2*j:], numfmt.F32ToF16(math.Float32bits(float32(j+1))))
	}
	// ampq: x at dataBase+8, w at dataBase+0x40.
	for i := 0; i < 8; i++ {
		d[8+i] = uint8(0x31 + 7*i)
	}
	for j := 0; j < 32; j++ {
		d[0x40+j] = uint8(0x20 + 3*j)
		if j%5 == 0 {
			d[0x40+j] |= 0x80
		}
	}
	if _, err := m.Run(nil, 0); err != nil {
		t.Fatal(err)
	}
	var want, got []float32
	for j := 0; j < 16; j++ {
		want = append(want, 2*float32(j+1))
		got = append(got, math.Float32frombits(binary.LittleEndian.Uint32(d[0x100+4*j:])))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("amph row 1 mismatch (-want +got):\n%s", diff)
	}

	// ampq: formats E4M3FNUZ (x) and E4M3FN (w), scale A -1.
	fa, fb := numfmt.E4M3FNUZ, numfmt.E4M3FN
	xa, wa := d[8:16], d[0x40:0x60]
	want = want[:0]
	got = got[:0]
	for j := 0; j < 16; j++ {
		var acc float32
		for k := 0; k < 2; k++ {
			x := math.Float32frombits(numfmt.F8ToF32(xa[4*k+2], fa, 0))
			w := math.Float32frombits(numfmt.F8ToF32(wa[16*k+j], fb, 0))
			acc += float32(float64(x) * float64(w) / 2)
		}
		want = append(want, acc)
		got = append(got, math.Float32frombits(binary.LittleEndian.Uint32(d[0x140+4*j:])))
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) })); diff != "" {
		t.Errorf("ampq row 2 mismatch (-want +got):\n%s", diff)
	}
	snap := m.Snapshot(0)
	if snap.Ctx[0].Running || snap.Ctx[0].M[0] != dataBase+16 || snap.Ctx[0].M[1] != dataBase+0x60 {
		t.Errorf("worker 0 after the run: running %v, $m0 %#x, $m1 %#x", snap.Ctx[0].Running, snap.Ctx[0].M[0], snap.Ctx[0].M[1])
	}
}

func signedField(v int) uint32 { return uint32(v) & 63 }
