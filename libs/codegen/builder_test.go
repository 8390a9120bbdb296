package codegen

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/arch"
	"ipu.local/libs/asm"
	"ipu.local/libs/isa"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func words(t *testing.T, code []byte) []uint32 {
	t.Helper()
	out := make([]uint32, len(code)/4)
	for i := range out {
		out[i] = isa.Word(code[4*i:])
	}
	return out
}

func TestBuilderEncodings(t *testing.T) {
	p := arch.MustLookup("ipu21-tiny")
	b := NewBuilder(p, codeBase)
	top := b.Here()
	fwd := b.Label()
	b.Li(M1, 5)                 // 1a100005
	b.Brz(M1, fwd)              // 21010002: skips two
	b.Addi(M1, M1, -1)          // 1011ffff
	b.Br(top)                   // 200ffffc: back four
	b.Bind(fwd)                 // 0x4c010
	b.LoadConst(M2, 0x12345678) // 1a205678, 1b201234
	b.LoadConst(M3, 0xFFFFF)    // 1a3fffff
	b.LoadF32(A1, 1)            // 43100000, 44103f80
	b.LoadLabel(M4, fwd)        // 1a44c010
	end := b.Label()
	b.Rpti(300, end) // 26012c02
	b.Ld64P(A2, M5, 8)
	b.St64P(A2, M6, 8)
	b.Bind(end)
	empty := b.Label()
	b.Rpt(M7, empty) // 25070000: empty body
	b.Bind(empty)
	b.Call(M8, top)
	b.Word(0xDEADBEEF)
	code, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	want := []uint32{
		0x1a100005, 0x21010002, 0x1011ffff, 0x200ffffc,
		0x1a205678, 0x1b201234, 0x1a3fffff, 0x43100000, 0x44103f80, 0x1a44c010,
		0x26012c02, 0x3c250008, 0x3d260008, 0x25070000, 0x238ffff1, 0xdeadbeef,
	}
	if diff := cmp.Diff(want, words(t, code)); diff != "" {
		var dis bytes.Buffer
		asm.Disassemble(&dis, codeBase, code)
		t.Errorf("encoding mismatch (-want +got):\n%s\n%s", diff, dis.String())
	}
	if a, ok := b.Addr(fwd); !ok || a != 0x4c010 {
		t.Errorf("Addr(fwd) = %#x, %v; want 0x4c010", a, ok)
	}
}

func TestBuilderIssued(t *testing.T) {
	b := NewBuilder(nil, 0)
	b.Nop()
	b.Repeat(10, M1, func() {
		b.Nop()
		b.F1(isa.V2EXP, A0, A0) // 4 cycles
		b.Repeat(0, M1, func() { b.Nop() })
	})
	b.Repeat(5000, M1, func() { b.Ampst(M2, 0) })
	if diff := cmp.Diff(int64(1+1+10*5+1+5000*4), b.Issued()); diff != "" {
		t.Errorf("issued mismatch (-want +got):\n%s", diff)
	}
	code, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	// rpti 10 of 2, then rpt $m1 of 1: the 5000-count loop needs a register.
	if got := words(t, code); got[1] != 0x26000a02 || got[4] != 0x25010001 {
		t.Errorf("repeat encodings %08x %08x", got[1], got[4])
	}
}

func TestBuilderErrors(t *testing.T) {
	p := arch.MustLookup("ipu21-tiny")
	tests := []struct {
		name  string
		base  uint32
		build func(b *Builder)
		want  string
	}{
		{"unbound", codeBase, func(b *Builder) { b.Br(b.Label()) }, "codegen: pc 0x4c000: label 1 is never bound"},
		{"bound-twice", codeBase, func(b *Builder) { l := b.Here(); b.Nop(); b.Bind(l) }, "codegen: pc 0x4c004: label 1 bound twice"},
		{"unknown-label", codeBase, func(b *Builder) { b.Br(Label(7)) }, "codegen: pc 0x4c000: unknown label 7"},
		{"branch-range", codeBase, func(b *Builder) {
			l := b.Label()
			b.Brnz(M1, l)
			for i := 0; i < 40000; i++ {
				b.Nop()
			}
			b.Bind(l)
		}, "codegen: pc 0x4c000: label 1: brnz: immediate 40000 does not fit in 16 signed bits"},
		{"imm-range", codeBase, func(b *Builder) { b.Addi(M1, M1, 40000) }, "codegen: pc 0x4c000: addi: immediate 40000 does not fit in 16 signed bits"},
		{"pair", codeBase, func(b *Builder) { b.Ld64(A1, M1, 0) }, "codegen: pc 0x4c000: ld64: register $a1 is not a multiple of 2"},
		{"rpti-count", codeBase, func(b *Builder) { l := b.Label(); b.Rpti(5000, l); b.Bind(l) }, "codegen: pc 0x4c000: rpti count 5000 out of range [0, 4095]"},
		{"rpti-body", codeBase, func(b *Builder) {
			l := b.Label()
			b.Rpti(2, l)
			for i := 0; i < 256; i++ {
				b.Nop()
			}
			b.Bind(l)
		}, "codegen: pc 0x4c000: rpti body of 256 instructions exceeds 255"},
		{"rpt-branch", codeBase, func(b *Builder) {
			l := b.Label()
			b.Rpt(M1, l)
			b.Brz(M2, l)
			b.Bind(l)
		}, "codegen: pc 0x4c000: repeat body holds brz at 0x4c004"},
		{"rpt-data", codeBase, func(b *Builder) {
			l := b.Label()
			b.Rpt(M1, l)
			b.Word(0)
			b.Bind(l)
		}, "codegen: pc 0x4c000: repeat body holds a data word at 0x4c004"},
		{"rpt-backwards", codeBase, func(b *Builder) { l := b.Here(); b.Nop(); b.Rpt(M1, l) }, "codegen: pc 0x4c004: repeat body ends before it starts"},
		{"executable", 0x80000, func(b *Builder) { b.Nop() }, "codegen: code [0x80000, 0x80004) outside the executable range [0x4c000, 0x80000)"},
		{"align", codeBase + 2, func(b *Builder) { b.Nop() }, "codegen: pc 0x4c002: base 0x4c002 is not 4-byte aligned"},
		{"launch", codeBase, func(b *Builder) { EmitLaunch(b, b.Here(), 7) }, "codegen: pc 0x4c000: launch of 7 workers (want 0..6)"},
		// An instruction that reached the builder unchecked (no fixup
		// fills it in) is an error in Finish, not a zero word.
		{"unchecked", codeBase, func(b *Builder) { b.Nop(); b.push(isa.Inst{Op: isa.ADDI, D: 1, A: 1, Imm: 40000}, false, 0) }, "codegen: pc 0x4c004: addi: immediate 40000 does not fit in 16 signed bits"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBuilder(p, tc.base)
			tc.build(b)
			_, err := b.Finish()
			if diff := cmp.Diff(tc.want, fmt.Sprint(err)); diff != "" {
				t.Errorf("error mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// checkGoldenDis compares a disassembly with testdata/name (-update
// rewrites the file).
func checkGoldenDis(t *testing.T, name string, dis []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, dis, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(string(dis), "\n")); diff != "" {
		t.Errorf("disassembly mismatch (-want +got); rerun with -update if intended:\n%s", diff)
	}
}

func TestBuilderGolden(t *testing.T) {
	p := arch.MustLookup("ipu21-tiny")
	code, dis, err := goldenBuild(p)
	if err != nil {
		t.Fatal(err)
	}
	checkGoldenDis(t, "kernels.dis", dis)
	// Deterministic: a second build gives the same bytes.
	again, _, err := goldenBuild(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(code, again) {
		t.Error("a second build differs")
	}
}

// goldenBuild builds two kernels and a supervisor that runs them, and
// disassembles the result.
func goldenBuild(p *arch.Preset) ([]byte, []byte, error) {
	b := NewBuilder(p, codeBase)
	mm := MatMul{Type: AMPFP16, M: 8, K: 16, N: 32, A: nonIlBuf, B: ilBuf, C: ilBuf + 0x4000, CStride: 32, Workers: 6}
	sm := Rows{Op: Softmax, R: 4, C: 9, X: ilBuf + 0x8000, XStride: 10, Y: ilBuf + 0x8000, YStride: 10, Workers: 6}
	km, err := EmitMatMul(b, mm)
	if err != nil {
		return nil, nil, err
	}
	ks, err := EmitRows(b, sm)
	if err != nil {
		return nil, nil, err
	}
	sup := b.Here()
	EmitLaunch(b, km.Entry, km.Workers)
	b.Join()
	EmitLaunch(b, ks.Entry, ks.Workers)
	b.Join()
	b.Halt()
	code, err := b.Finish()
	if err != nil {
		return nil, nil, err
	}
	var dis bytes.Buffer
	fmt.Fprintf(&dis, "// matmul fp16 8x16x32 at %#x (%d cycles); softmax 4x9 at %#x (%d cycles); supervisor at %#x\n",
		mustAddr(b, km.Entry), km.Cycles(), mustAddr(b, ks.Entry), ks.Cycles(), mustAddr(b, sup))
	if err := asm.Disassemble(&dis, codeBase, code); err != nil {
		return nil, nil, err
	}
	return code, dis.Bytes(), nil
}

func mustAddr(b *Builder, l Label) uint32 {
	a, _ := b.Addr(l)
	return a
}

// TestSplice checks that code built in one builder and spliced into
// another, after code of its own, assembles to the bytes of the same
// calls made in place: branches, repeat loops, label loads and label
// words (tables of addresses) resolve at the new place.
func TestSplice(t *testing.T) {
	p := arch.MustLookup("ipu21-tiny")
	body := func(b *Builder) Label {
		entry := b.Here()
		table, loop, end := b.Label(), b.Label(), b.Label()
		b.LoadLabel(M1, table)
		b.Li(M2, 3)
		b.Bind(loop)
		b.Rpti(2, end)
		b.Nop()
		b.Bind(end)
		b.Addi(M2, M2, -1)
		b.Brnz(M2, loop)
		b.Exit()
		b.Bind(table)
		b.WordLabel(entry, 0)
		b.WordLabel(loop, 8)
		b.Word(0xdeadbeef)
		return entry
	}
	prefix := func(b *Builder) {
		for range 5 {
			b.Nop()
		}
	}
	direct := NewBuilder(p, p.Executable.Lo)
	prefix(direct)
	wantEntry := body(direct)
	want, err := direct.Finish()
	if err != nil {
		t.Fatal(err)
	}

	scratch := NewBuilder(p, p.Executable.Lo+0x400)
	entry := body(scratch)
	spliced := NewBuilder(p, p.Executable.Lo)
	prefix(spliced)
	remap := spliced.Splice(scratch)
	got, err := spliced.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spliced code differs (-direct +spliced):\n%s", diff)
	}
	wa, _ := direct.Addr(wantEntry)
	ga, ok := spliced.Addr(remap(entry))
	if !ok || ga != wa {
		t.Errorf("spliced entry at %#x (bound %v), direct at %#x", ga, ok, wa)
	}
	if spliced.Issued() != direct.Issued() {
		t.Errorf("issued %d spliced, %d direct", spliced.Issued(), direct.Issued())
	}
}
