package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/asm"
	"ipu.local/libs/onnx"
	"ipu.local/libs/pack"
	"ipu.local/libs/sim"
	"ipu.local/libs/verdict"
)

// pages is a minimal host for the dot64 run: page id -> bytes.
type pages map[uint8][]byte

func (p pages) span(addr uint32, n int) ([]byte, error) {
	pg, ok := p[uint8(addr>>24)]
	off := int(addr & 0xffffff)
	if !ok || off+n > len(pg) {
		return nil, fmt.Errorf("host address %#x+%d outside the pages", addr, n)
	}
	return pg[off : off+n], nil
}

func (p pages) ReadHost(addr uint32, dst []byte) error {
	b, err := p.span(addr, len(dst))
	if err == nil {
		copy(dst, b)
	}
	return err
}

func (p pages) WriteHost(addr uint32, src []byte) error {
	b, err := p.span(addr, len(src))
	if err == nil {
		copy(b, src)
	}
	return err
}

// TestDot64Cycles runs the hand-written dot64 program and explains its
// cycle count from the ipu21 preset, superstep by superstep.
func TestDot64Cycles(t *testing.T) {
	root := filepath.Join("..", "..")
	src, err := os.ReadFile(filepath.Join(root, "testdata", "asm", "dot64.s"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := asm.Assemble("dot64.s", src, asm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := arch.MustLookup(o.Arch)
	pkg, err := pack.Build(o, p)
	if err != nil {
		t.Fatal(err)
	}
	mems := make([][]byte, p.Tiles)
	m := sim.New(p, func(tile int) []byte {
		if mems[tile] == nil {
			mems[tile] = make([]byte, p.Memory.Size())
		}
		return mems[tile]
	}, sim.Options{})
	for tile, idx := range pkg.TileImage {
		img := pkg.Images[idx]
		if img.Idle {
			continue
		}
		var segs []sim.Segment
		for _, s := range img.Segments {
			data := s.Data
			if s.Kind == obj.BSS {
				data = make([]byte, s.Size)
			}
			segs = append(segs, sim.Segment{Addr: s.Addr, Data: data, Code: s.Kind == obj.Code})
		}
		if err := m.Load(tile, sim.Image{Entry: img.Entry, Segments: segs}); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range pkg.Config {
		if err := m.Configure(int(w.Tile), w.Reg, w.Value); err != nil {
			t.Fatal(err)
		}
	}
	// Startup: every tile's first instruction is hsync.
	if _, err := m.Run(nil, 0); err != nil {
		t.Fatal(err)
	}

	data := filepath.Join(root, "testdata", "asm", "dot64", "test_data_set_0")
	host := pages{0: make([]byte, 65536), 1: make([]byte, 4)}
	for i, off := range []int{0, 32768} {
		x, err := onnx.ReadTensorFile(filepath.Join(data, fmt.Sprintf("input_%d.pb", i)))
		if err != nil {
			t.Fatal(err)
		}
		copy(host[0][off:], x.Raw)
	}
	res, err := m.Run(host, 0)
	if err != nil {
		t.Fatal(err)
	}
	want, err := onnx.ReadTensorFile(filepath.Join(data, "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	out := pkg.Host.Outputs[0]
	v, err := verdict.Compare(out.Name, out.DType, out.Accumulate, host[1], want.Raw)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Pass {
		t.Errorf("dot = %v, want %v", math.Float32frombits(binary.LittleEndian.Uint32(host[1])), math.Float32frombits(binary.LittleEndian.Uint32(want.Raw)))
	}

	// The arithmetic. I is the issue interval of one context (a context
	// issues at most once every Workers cycles); a superstep costs the
	// longest tile (the cycle after its sync or hsync issues), or the host
	// link's time for the superstep's host bytes if that is longer, plus
	// SyncCycles for the barrier.
	I := int64(p.Workers)
	hostCycles := func(bytes int64) int64 {
		return (bytes + int64(p.HostBytesPerCycle) - 1) / int64(p.HostBytesPerCycle)
	}
	const tiles, elems = 64, 256
	// 1 fetch: 64 tiles each read 2 x 512 bytes; the host link (43 bytes a
	// cycle on ipu21) is the bottleneck, not the tiles' 10 instructions.
	fetch := hostCycles(tiles * 2 * elems * 2)
	// 2 dot: the supervisor issues li, li, run (cycle 12); each later li
	// loses one cycle because the slot it would use now belongs to the
	// worker just started, so run w issues at 12 + 13w. Worker w starts
	// in its own slot 6 cycles after its run and issues 140 instructions
	// (6 set-up, 16 x 8 in the repeat loop, 6 to finish), one every I
	// cycles: worker 3 exits at 12+39+6 + 139*I. join issues the cycle
	// after, then 12 more instructions up to sync.
	workerInstrs := int64(6 + 16*8 + 6)
	lastExit := 12 + 13*3 + I + (workerInstrs-1)*I
	dot := lastExit + 1 + 12*I + 1
	// 3 reduce0: the receiver issues 10 instructions before its delay,
	// then waits 4 more cycles: recv at 10*I + 4 = 64, which is the
	// sender's send (9*I = 54, after a delay of 0) plus the latency; its
	// sync follows one interval later.
	lat := int64(p.Latency(1, 0))
	send := 9 * I
	recv := send + lat
	if recv != 10*I+4 {
		t.Fatalf("latency %d does not match the program's delay of 4", lat)
	}
	reduce0 := recv + I + 1
	// 4-8: every later step first runs br and the 9 instructions of xnext.
	reduce := 10*I + reduce0
	// 9 result: br, 9 of xnext, brnz, li, lih, li, li, hout, hsync.
	result := 16*I + 1
	wantPhases := []int64{fetch, dot, reduce0, reduce, reduce, reduce, reduce, reduce, result}
	var gotPhases []int64
	var total int64
	for _, ph := range res.Phases {
		gotPhases = append(gotPhases, ph.Cycles)
	}
	for _, c := range wantPhases {
		total += c + int64(p.SyncCycles)
	}
	if diff := cmp.Diff(wantPhases, gotPhases); diff != "" {
		t.Errorf("superstep cycles mismatch (-want +got):\n%s", diff)
	}
	if res.Cycles != total {
		t.Errorf("total cycles = %d, want %d", res.Cycles, total)
	}
	t.Logf("dot64: %d cycles = supersteps %v + %d syncs of %d", res.Cycles, gotPhases, len(wantPhases), p.SyncCycles)
}
