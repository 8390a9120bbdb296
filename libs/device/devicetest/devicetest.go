// Package devicetest builds a tiny application package for testing the
// device and the tools that drive it, without the compiler.
//
// Every busy tile runs Program: each call it reads four int32 words x from
// host page 0, adds the number of calls it has served (this one included)
// and its tile index, and writes them to host page 1 at byte 16 x tile.
// The package's input is "x" (int32 [4]) and its output "y" (int32
// [tiles, 4]); idle tiles leave their part of y zero.
package devicetest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
	"ipu.local/libs/pack"
	"ipu.local/libs/sim"
)

// Where Program keeps its words and its call counter in tile memory.
const (
	BufAddr     = 0x90000
	CounterAddr = 0x90100
)

// Program is the supervisor code of a busy tile:
//
//	loop:	hsync $m0
//		li $m1, BufAddr; li $m3, 16; li $m2, 0
//		hin $m1, $m2, $m3
//		li $m7, CounterAddr; ldm $m8, [$m7+0]; addi $m8, $m8, 1; stm $m8, [$m7+0]
//		get $m5, tileid; add $m8, $m8, $m5
//		(i = 0..3) ldm $m4, [$m1+4i]; add $m4, $m4, $m8; stm $m4, [$m1+4i]
//		shli $m5, $m5, 4; li $m6, 0; lih $m6, 0x100; add $m6, $m6, $m5
//		hout $m6, $m1, $m3
//		br loop
func Program() []byte {
	var code []isa.Inst
	emit := func(i isa.Inst) { code = append(code, i) }
	emit(isa.Inst{Op: isa.HSYNC, D: 0})
	emit(isa.Inst{Op: isa.LI, D: 1, Imm: BufAddr})
	emit(isa.Inst{Op: isa.LI, D: 3, Imm: 16})
	emit(isa.Inst{Op: isa.LI, D: 2, Imm: 0})
	emit(isa.Inst{Op: isa.HIN, D: 1, A: 2, B: 3})
	emit(isa.Inst{Op: isa.LI, D: 7, Imm: CounterAddr})
	emit(isa.Inst{Op: isa.LDM, D: 8, A: 7})
	emit(isa.Inst{Op: isa.ADDI, D: 8, A: 8, Imm: 1})
	emit(isa.Inst{Op: isa.STM, D: 8, A: 7})
	emit(isa.Inst{Op: isa.GET, D: 5, Imm: isa.CSRTileID})
	emit(isa.Inst{Op: isa.ADD, D: 8, A: 8, B: 5})
	for i := int32(0); i < 4; i++ {
		emit(isa.Inst{Op: isa.LDM, D: 4, A: 1, Imm: 4 * i})
		emit(isa.Inst{Op: isa.ADD, D: 4, A: 4, B: 8})
		emit(isa.Inst{Op: isa.STM, D: 4, A: 1, Imm: 4 * i})
	}
	emit(isa.Inst{Op: isa.SHLI, D: 5, A: 5, Imm: 4})
	emit(isa.Inst{Op: isa.LI, D: 6, Imm: 0})
	emit(isa.Inst{Op: isa.LIH, D: 6, Imm: 0x100})
	emit(isa.Inst{Op: isa.ADD, D: 6, A: 6, B: 5})
	emit(isa.Inst{Op: isa.HOUT, D: 6, A: 1, B: 3})
	emit(isa.Inst{Op: isa.BR, Imm: -int32(len(code) + 1)})
	out := make([]byte, 4*len(code))
	for i, in := range code {
		isa.PutWord(out[4*i:], isa.MustEncode(in))
	}
	return out
}

// Package returns a canonical package (ipuexe.Write accepts it) for the
// preset archName whose tiles listed in busy run Program; the other tiles
// are idle.
func Package(archName string, busy ...int) *ipuexe.Package {
	p := arch.MustLookup(archName)
	code := Program()
	idle := ipuexe.Image{Idle: true}
	prog := ipuexe.Image{
		Entry: p.Executable.Lo,
		Segments: []obj.Segment{
			{Name: "text", Kind: obj.Code, Addr: p.Executable.Lo, Size: uint32(len(code)), Data: code},
			{Name: "buf", Kind: obj.BSS, Addr: BufAddr, Size: 0x200},
		},
		Symbols: []obj.Symbol{{Name: "main", Addr: p.Executable.Lo, Size: uint32(len(code)), Code: true}},
	}
	isBusy := make([]bool, p.Tiles)
	for _, t := range busy {
		isBusy[t] = true
	}
	sum := sha256.Sum256([]byte("devicetest"))
	pkg := &ipuexe.Package{
		Arch:      archName,
		Compiler:  "0.1.0",
		Tiles:     p.Tiles,
		Object:    hex.EncodeToString(sum[:]),
		TileImage: make([]uint32, p.Tiles),
		Config:    []obj.RegWrite{{Tile: obj.AllTiles, Reg: sim.RegWatchdog, Value: 1 << 20}},
		Host: obj.HostProgram{
			Phases:  []obj.Phase{{Kind: obj.HostExchange, Name: "io"}},
			Pages:   []obj.Page{{ID: 0, Bytes: 16}, {ID: 1, Bytes: uint32(16 * p.Tiles)}},
			Inputs:  []obj.Tensor{{Name: "x", DType: "int32", Shape: []int64{4}, Page: 0}},
			Outputs: []obj.Tensor{{Name: "y", DType: "int32", Shape: []int64{int64(p.Tiles), 4}, Page: 1}},
		},
	}
	// Images are numbered by first use.
	index := map[bool]int{}
	for t := range pkg.TileImage {
		i, ok := index[isBusy[t]]
		if !ok {
			i = len(pkg.Images)
			index[isBusy[t]] = i
			if isBusy[t] {
				pkg.Images = append(pkg.Images, prog)
			} else {
				pkg.Images = append(pkg.Images, idle)
			}
		}
		pkg.TileImage[t] = uint32(i)
		if isBusy[t] {
			pkg.Config = append(pkg.Config, pack.TileConfig(t, prog.Entry, prog.Segments, false)...)
		}
	}
	return pkg
}

// Words encodes int32 words little-endian, as the package's tensors hold
// them.
func Words(v ...uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}
