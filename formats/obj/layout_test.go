package obj_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"ipu.local/formats/obj"
)

// mixed is an output-valid layout of a 12x32 float16 tensor using every
// order, transposed and padded blocks, in a page of 0x800 bytes.
func mixed() obj.Tensor {
	return obj.Tensor{Name: "m", DType: "float16", Shape: []int64{3, 4, 32}, Page: 2, Blocks: []obj.Block{
		// Rows 0..5, cols 0..20: row-major on a padded 6x24 grid.
		{Offset: 0x000, R0: 0, R1: 5, C0: 0, C1: 20, Rows: 6, Cols: 24, Order: obj.RowMajor},
		// Rows 0..5, cols 20..32: A panels on an 8x12 grid.
		{Offset: 0x120, R0: 0, R1: 5, C0: 20, C1: 32, Rows: 8, Cols: 12, Order: obj.APanel},
		// Rows 5..12, cols 0..16: B panels on a 7x16 grid.
		{Offset: 0x1e0, R0: 5, R1: 12, C0: 0, C1: 16, Rows: 7, Cols: 16, Order: obj.BPanel},
		// Rows 5..12, cols 16..32 as the transpose's rows 16..32, cols
		// 5..12: A panels on a 16x8 grid.
		{Offset: 0x300, R0: 16, R1: 32, C0: 5, C1: 12, Rows: 16, Cols: 8, Transpose: true, Order: obj.APanel},
	}}
}

// naiveIndex is the grid index of region element (r, c), from the
// formulas of the format's documentation.
func naiveIndex(b obj.Block, r, c uint32) uint32 {
	switch b.Order {
	case obj.APanel:
		return (r/4)*4*b.Cols + 4*c + r%4
	case obj.BPanel:
		return (c/16)*16*b.Rows + 16*r + c%16
	}
	return r*b.Cols + c
}

// ramp is n float16-sized elements numbered 1, 2, ... (never zero).
func ramp(n int) []byte {
	b := make([]byte, 2*n)
	for i := range n {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(i+1))
	}
	return b
}

func TestScatterGather(t *testing.T) {
	tn := mixed()
	const rows, cols = 12, 32
	data := ramp(rows * cols)
	page := bytes.Repeat([]byte{0xee}, 0x800)
	if err := tn.Scatter(page, data); err != nil {
		t.Fatalf("Scatter: %v", err)
	}
	// Every region element where the documentation puts it, and zeros
	// in every grid position outside the region.
	for i, b := range tn.Blocks {
		inRegion := map[uint32]bool{}
		for r := range b.R1 - b.R0 {
			for c := range b.C1 - b.C0 {
				mr, mc := b.R0+r, b.C0+c
				if b.Transpose {
					mr, mc = mc, mr
				}
				idx := naiveIndex(b, r, c)
				inRegion[idx] = true
				got := binary.LittleEndian.Uint16(page[b.Offset+2*idx:])
				if want := uint16(mr*cols + mc + 1); got != want {
					t.Fatalf("block %d region (%d, %d): page holds element %d, want %d", i, r, c, got-1, want-1)
				}
			}
		}
		for idx := range b.Rows * b.Cols {
			if !inRegion[idx] && binary.LittleEndian.Uint16(page[b.Offset+2*idx:]) != 0 {
				t.Errorf("block %d: padding at grid index %d not zeroed", i, idx)
			}
		}
	}
	if page[0x7ff] != 0xee {
		t.Errorf("Scatter wrote outside its blocks")
	}
	got, err := tn.Gather(page)
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	if diff := cmp.Diff(data, got); diff != "" {
		t.Errorf("Gather(Scatter(data)) mismatch (-want +got):\n%s", diff)
	}
	// The layout is valid as an output, and as an input.
	for _, h := range []obj.HostProgram{
		{Pages: []obj.Page{{ID: 2, Bytes: 0x800}}, Outputs: []obj.Tensor{tn}},
		{Pages: []obj.Page{{ID: 2, Bytes: 0x800}}, Inputs: []obj.Tensor{tn}},
	} {
		if err := obj.ValidateHost(&h); err != nil {
			t.Errorf("ValidateHost: %v", err)
		}
	}
}

func TestBlockIndex(t *testing.T) {
	for _, b := range mixed().Blocks {
		for r := range b.R1 - b.R0 {
			for c := range b.C1 - b.C0 {
				if got, want := b.Index(r, c), uint64(naiveIndex(b, r, c)); got != want {
					t.Fatalf("%s block Index(%d, %d) = %d, want %d", b.Order, r, c, got, want)
				}
			}
		}
	}
}

func TestFlat(t *testing.T) {
	tn := obj.Tensor{Name: "x", DType: "float16", Shape: []int64{2, 3}, Offset: 4}
	page := make([]byte, 16)
	data := ramp(6)
	if err := tn.Scatter(page, data); err != nil {
		t.Fatal(err)
	}
	if want := append(make([]byte, 4), data...); !bytes.Equal(page, want) {
		t.Errorf("page % x, want % x", page, want)
	}
	got, err := tn.Gather(page)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(data, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestSpan(t *testing.T) {
	tests := []struct {
		name   string
		t      obj.Tensor
		lo, hi uint64
	}{
		{"flat", obj.Tensor{DType: "float", Shape: []int64{3, 5}, Offset: 8}, 8, 68},
		{"scalar", obj.Tensor{DType: "int64", Offset: 16}, 16, 20}, // int64 held as int32
		{"unknown type", obj.Tensor{DType: "int4", Shape: []int64{8}, Offset: 16}, 16, 16},
		{"blocks", mixed(), 0, 0x300 + 16*8*2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi := tt.t.Span()
			if lo != tt.lo || hi != tt.hi {
				t.Errorf("Span() = [%#x, %#x), want [%#x, %#x)", lo, hi, tt.lo, tt.hi)
			}
		})
	}
}

func TestScatterGatherErrors(t *testing.T) {
	bad := mixed()
	bad.Blocks[1].C1 = 33
	over := mixed()
	over.Blocks[3].C0 = 4
	tests := []struct {
		name    string
		t       obj.Tensor
		page    int
		data    int
		scatter string // "" when Scatter succeeds
		gather  string
	}{
		{"short data", mixed(), 0x800, 12*32*2 - 1, "767 bytes of data, want 768 (float16 [3 4 32])", ""},
		{"short page", mixed(), 0x37f, 12 * 32 * 2, "block 3: bytes [0x300,0x400) overrun the page of 895 bytes", "block 3: bytes [0x300,0x400)"},
		{"bad block", bad, 0x800, 12 * 32 * 2, "block 1: cols [20,33) not a non-empty range of the 12x32 matrix view", "block 1: cols"},
		{"covered twice", over, 0x800, 12 * 32 * 2, "", "block 3: element (4, 16) of the matrix view is also in block 0"},
		{"flat overrun", obj.Tensor{DType: "float", Shape: []int64{4}, Offset: 8}, 20, 16, "bytes [0x8,0x18) overrun the page of 20 bytes", "overrun"},
		{"flat unknown type", obj.Tensor{DType: "complex64", Shape: []int64{4}}, 20, 4, `element type "complex64" has no size here`, "has no size"},
		{"blocks unknown type", obj.Tensor{DType: "int8", Shape: []int64{4}, Blocks: []obj.Block{{R1: 1, C1: 4, Rows: 1, Cols: 4}}}, 20, 4, `element type "int8" cannot be laid out in blocks`, "cannot be laid out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page := make([]byte, tt.page)
			err := tt.t.Scatter(page, make([]byte, tt.data))
			if tt.scatter == "" && err != nil {
				t.Errorf("Scatter: %v", err)
			}
			if tt.scatter != "" && (err == nil || !strings.Contains(err.Error(), tt.scatter)) {
				t.Errorf("Scatter error %v, want one containing %q", err, tt.scatter)
			}
			_, err = tt.t.Gather(page)
			if tt.gather == "" && err != nil {
				t.Errorf("Gather: %v", err)
			}
			if tt.gather != "" && (err == nil || !strings.Contains(err.Error(), tt.gather)) {
				t.Errorf("Gather error %v, want one containing %q", err, tt.gather)
			}
		})
	}
}

func TestValidateBlocks(t *testing.T) {
	page := []obj.Page{{ID: 0, Bytes: 0x1000}, {ID: 1, Bytes: 0x1000}}
	// out is a float output of shape [8 32] with the given blocks.
	out := func(bs ...obj.Block) obj.Tensor {
		return obj.Tensor{Name: "y", DType: "float", Shape: []int64{8, 32}, Page: 1, Blocks: bs}
	}
	in := func(bs ...obj.Block) obj.Tensor {
		return obj.Tensor{Name: "x", DType: "float16", Shape: []int64{8, 32}, Page: 1, Blocks: bs}
	}
	whole := obj.Block{R1: 8, C1: 32, Rows: 8, Cols: 32}
	top := obj.Block{R1: 4, C1: 32, Rows: 4, Cols: 32}
	bottom := obj.Block{Offset: 0x200, R0: 4, R1: 8, C1: 32, Rows: 4, Cols: 32}
	with := func(b obj.Block, f func(*obj.Block)) obj.Block { f(&b); return b }
	tests := []struct {
		name    string
		inputs  []obj.Tensor
		outputs []obj.Tensor
		pages   []obj.Page
		want    string // "" for valid
	}{
		{"whole", nil, []obj.Tensor{out(whole)}, nil, ""},
		{"halves", nil, []obj.Tensor{out(bottom, top)}, nil, ""},
		{"input covers twice", []obj.Tensor{in(whole, with(top, func(b *obj.Block) { b.Offset = 0x200 }), with(top, func(b *obj.Block) { b.Offset = 0x400 }))}, nil, nil, ""},
		{"input partial", []obj.Tensor{in(top)}, nil, nil, ""},
		{"inputs share bytes", []obj.Tensor{in(top), in(top)}, nil, nil, ""},
		{"unknown order", nil, []obj.Tensor{out(with(whole, func(b *obj.Block) { b.Order = 3 }))}, nil, `host output "y" block 0: unknown order 3`},
		{"empty rows", nil, []obj.Tensor{out(with(whole, func(b *obj.Block) { b.R0 = 8 }))}, nil, `host output "y" block 0: rows [8,8) not a non-empty range of the 8x32 matrix view`},
		{"rows outside", nil, []obj.Tensor{out(with(whole, func(b *obj.Block) { b.R1, b.Rows = 9, 9 }))}, nil, "block 0: rows [0,9) not a non-empty range"},
		{"rows outside transposed", nil, []obj.Tensor{out(with(whole, func(b *obj.Block) { b.Transpose = true }))}, nil, "block 0: cols [0,32) not a non-empty range of the 32x8 transposed matrix view"},
		{"cols outside", nil, []obj.Tensor{out(with(whole, func(b *obj.Block) { b.C0, b.C1 = 32, 33 }))}, nil, "block 0: cols [32,33) not a non-empty range"},
		{"small grid", nil, []obj.Tensor{out(with(whole, func(b *obj.Block) { b.Cols = 31 }))}, nil, "block 0: grid 8x31 smaller than the region 8x32"},
		{"apanel rows", nil, []obj.Tensor{out(with(top, func(b *obj.Block) { b.R1, b.Rows, b.Order = 3, 3, obj.APanel }))}, nil, "block 0: apanel grid rows 3 not a multiple of 4"},
		{"bpanel cols", nil, []obj.Tensor{out(with(whole, func(b *obj.Block) { b.Cols, b.Order = 40, obj.BPanel }))}, nil, "block 0: bpanel grid cols 40 not a multiple of 16"},
		{"4 GiB", nil, []obj.Tensor{out(with(whole, func(b *obj.Block) { b.Rows, b.Cols = 1<<16, 1<<16 }))}, nil, "block 0: grid 65536x65536 of 4-byte elements exceeds 4 GiB"},
		{"overrun page", nil, []obj.Tensor{out(with(whole, func(b *obj.Block) { b.Offset = 0xf00 }))}, nil, "block 0: bytes [0xf00,0x1300) overrun the page of 4096 bytes"},
		{"no page", nil, []obj.Tensor{out(whole)}, []obj.Page{{ID: 0, Bytes: 16}}, `host output "y": page 1 not declared`},
		{"offset with blocks", nil, []obj.Tensor{func() obj.Tensor { t := out(whole); t.Offset = 4; return t }()}, nil, `host output "y": offset 0x4 with blocks (want 0)`},
		{"no size", nil, []obj.Tensor{func() obj.Tensor { t := out(whole); t.DType = "complex64"; return t }()}, nil, `host output "y": element type "complex64" cannot be laid out in blocks`},
		{"not covered", nil, []obj.Tensor{out(top)}, nil, `host output "y": element (4, 0) of the 8x32 matrix view is not in any block`},
		{"not covered at start", nil, []obj.Tensor{out(bottom)}, nil, `host output "y": element (0, 0) of the 8x32 matrix view is not in any block`},
		{"column gap", nil, []obj.Tensor{out(
			obj.Block{R1: 8, C1: 16, Rows: 8, Cols: 16},
			obj.Block{Offset: 0x200, R1: 8, C0: 17, C1: 32, Rows: 8, Cols: 15},
		)}, nil, "element (0, 16) of the 8x32 matrix view is not in any block"},
		{"twice, same start", nil, []obj.Tensor{out(top, with(top, func(b *obj.Block) { b.Offset = 0x200; b.C0 = 31 }), bottom)}, nil, `host output "y" block 1: element (0, 31) of the matrix view is also in block 0`},
		{"twice, live block", nil, []obj.Tensor{out(
			obj.Block{R1: 8, C1: 16, Rows: 8, Cols: 16},
			obj.Block{Offset: 0x200, R1: 4, C0: 16, C1: 32, Rows: 4, Cols: 16},
			obj.Block{Offset: 0x300, R0: 4, R1: 8, C0: 8, C1: 32, Rows: 4, Cols: 24},
		)}, nil, `host output "y" block 2: element (4, 8) of the matrix view is also in block 0`},
		{"twice, transposed", nil, []obj.Tensor{out(whole, obj.Block{Offset: 0x400, R0: 3, R1: 4, C0: 2, C1: 3, Rows: 1, Cols: 1, Transpose: true})}, nil, `element (2, 3) of the matrix view is also in block 0`},
		{"output blocks share bytes", nil, []obj.Tensor{out(top, with(bottom, func(b *obj.Block) { b.Offset = 0x1f0 }))}, nil, `host output "y" block 1: page 1 bytes [0x1f0,0x3f0) overlap host output "y" block 0 (bytes [0x0,0x200))`},
		{"outputs share bytes", nil, []obj.Tensor{out(whole), func() obj.Tensor { t := out(whole); t.Name = "z"; return t }()}, nil, `host output "z" block 0: page 1 bytes [0x0,0x400) overlap host output "y" block 0`},
		{"output block on input", []obj.Tensor{{Name: "x", DType: "float", Shape: []int64{4}, Page: 1, Offset: 0x3fc}}, []obj.Tensor{out(whole)}, nil, `host input "x": page 1 bytes [0x3fc,0x40c) overlap host output "y" block 0 (bytes [0x0,0x400))`},
		{"input block on output", []obj.Tensor{in(top)}, []obj.Tensor{{Name: "y", DType: "float", Shape: []int64{4}, Page: 1, Offset: 0xfc}}, nil, `host output "y": page 1 bytes [0xfc,0x10c) overlap host input "x" block 0`},
		{"other page", []obj.Tensor{in(top)}, []obj.Tensor{{Name: "y", DType: "float", Shape: []int64{4}, Page: 0}}, nil, ""},
		{"flat tensors may share bytes", []obj.Tensor{{Name: "x", DType: "float", Shape: []int64{4}, Page: 1}}, []obj.Tensor{{Name: "y", DType: "float", Shape: []int64{4}, Page: 1}}, nil, ""},
		{"duplicate page", nil, nil, []obj.Page{{ID: 3, Bytes: 4}, {ID: 3, Bytes: 4}}, "host page 1: id 3 declared twice"},
		{"page too large", nil, nil, []obj.Page{{ID: 3, Bytes: obj.MaxPageBytes + 1}}, "host page 0 (id 3): 16777217 bytes, more than 16777216"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := obj.HostProgram{Pages: page, Inputs: tt.inputs, Outputs: tt.outputs}
			if tt.pages != nil {
				h.Pages = tt.pages
			}
			err := obj.ValidateHost(&h)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("ValidateHost: %v", err)
			case tt.want != "" && err == nil:
				t.Errorf("ValidateHost succeeded, want error containing %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
			if err != nil {
				return
			}
			// What validates writes and reads back.
			o := &obj.Object{Host: h}
			got, err := obj.Read(marshal(t, o))
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if diff := cmp.Diff(o, got, equate); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadCorruptBlocks(t *testing.T) {
	data := marshal(t, samples()["blocks"])
	_, off, n := section(data, 2)
	host := data[off : off+n]
	// The first block of input "a" follows its name, dtype, shape, page,
	// offset, accumulate and block count.
	a := bytes.Index(host, []byte("\x01\x00\x00\x00a\x07\x00\x00\x00float16"))
	nBlock := a + 5 + 11 + 4 + 2*8 + 1 + 4 + 8
	block0 := nBlock + 4
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"huge block count", patch(data, 2, nBlock, le32(0x10000000)), "host input block count 268435456 exceeds file size"},
		{"block flags", patch(data, 2, block0+28, []byte{2}), `host input "a" block 0: unknown flags 0x2`},
		{"block order", patch(data, 2, block0+29, []byte{7}), `host input "a" block 0: unknown order 7`},
		{"block rows", patch(data, 2, block0+8, le32(7)), `host input "a" block 0: rows [0,7) not a non-empty range of the 6x8 matrix view`},
		{"huge model", patch(data, 2, n-4-24, le32(0xfffffff0)), "host model length 4294967280 exceeds file size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := obj.Read(tt.data)
			var fe *obj.FormatError
			if !errors.As(err, &fe) || fe.Section != "host" || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want a host section *FormatError containing %q", err, tt.want)
			}
		})
	}
}

// grid lays a rows x cols float16 matrix out in A-panel blocks of about
// br x bc elements, padded to whole panels, as an output.
func grid(rows, cols, br, bc uint32) obj.Tensor {
	t := obj.Tensor{Name: "g", DType: "float16", Shape: []int64{int64(rows), int64(cols)}}
	var off uint32
	for r := uint32(0); r < rows; r += br {
		for c := uint32(0); c < cols; c += bc {
			b := obj.Block{Offset: off, R0: r, R1: min(r+br, rows), C0: c, C1: min(c+bc, cols), Cols: bc, Order: obj.APanel}
			b.Rows = (b.R1 - b.R0 + 3) / 4 * 4
			t.Blocks = append(t.Blocks, b)
			off += b.Rows * b.Cols * 2
		}
	}
	return t
}

// TestScatterLarge checks the scale the linker produces: a 2048x2048
// float16 operand in about 1500 blocks.
func TestScatterLarge(t *testing.T) {
	tn := grid(2048, 2048, 43, 64)
	lo, hi := tn.Span()
	page := make([]byte, hi)
	data := ramp(2048 * 2048)
	h := obj.HostProgram{Pages: []obj.Page{{Bytes: uint32(hi)}}, Outputs: []obj.Tensor{tn}}
	start := time.Now()
	if err := obj.ValidateHost(&h); err != nil {
		t.Fatal(err)
	}
	validated := time.Now()
	if err := tn.Scatter(page, data); err != nil {
		t.Fatal(err)
	}
	scattered := time.Now()
	got, err := tn.Gather(page)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d blocks, page [%#x, %#x): validate %v, scatter %v, gather %v", len(tn.Blocks), lo, hi,
		validated.Sub(start), scattered.Sub(validated), time.Since(scattered))
	if !bytes.Equal(got, data) {
		t.Errorf("Gather(Scatter(data)) differs from data")
	}
}

func BenchmarkScatter(b *testing.B) {
	tn := grid(2048, 2048, 43, 64)
	_, hi := tn.Span()
	page := make([]byte, hi)
	data := ramp(2048 * 2048)
	b.ReportAllocs()
	for b.Loop() {
		if err := tn.Scatter(page, data); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCoverRandom checks ValidateHost's coverage sweep against a count of
// every element on small random layouts, many of them tilings, and that
// Scatter and Gather never fail on a layout ValidateHost accepts.
func TestCoverRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 3000 {
		rows, cols := 1+rng.IntN(6), 1+rng.IntN(6)
		tn := obj.Tensor{Name: "y", DType: "float16", Shape: []int64{int64(rows), int64(cols)}}
		// Cut the matrix into a grid of pieces, then disturb some.
		cuts := func(n int) []uint32 {
			c := []uint32{0}
			for i := 1; i < n; i++ {
				if rng.IntN(2) == 0 {
					c = append(c, uint32(i))
				}
			}
			return append(c, uint32(n))
		}
		rc, cc := cuts(rows), cuts(cols)
		var off uint32
		for i := 1; i < len(rc); i++ {
			for j := 1; j < len(cc); j++ {
				b := obj.Block{Offset: off, R0: rc[i-1], R1: rc[i], C0: cc[j-1], C1: cc[j]}
				switch rng.IntN(12) {
				case 0:
					continue // a hole
				case 1:
					b.R1 = min(b.R1+1, uint32(rows)) // an overlap, maybe
				case 2:
					b.C0 = max(b.C0, 1) - 1
				}
				if rng.IntN(2) == 0 {
					b.R0, b.R1, b.C0, b.C1, b.Transpose = b.C0, b.C1, b.R0, b.R1, true
				}
				b.Order = obj.Order(rng.IntN(3))
				b.Rows, b.Cols = (b.R1-b.R0+3)/4*4, (b.C1-b.C0+15)/16*16
				off += b.Rows * b.Cols * 2
				tn.Blocks = append(tn.Blocks, b)
			}
		}
		if len(tn.Blocks) == 0 {
			continue
		}
		count := make([]int, rows*cols)
		for _, b := range tn.Blocks {
			for r := b.R0; r < b.R1; r++ {
				for c := b.C0; c < b.C1; c++ {
					if b.Transpose {
						count[int(c)*cols+int(r)]++
					} else {
						count[int(r)*cols+int(c)]++
					}
				}
			}
		}
		exact := !slices.ContainsFunc(count, func(n int) bool { return n != 1 })
		h := obj.HostProgram{Pages: []obj.Page{{Bytes: off}}, Outputs: []obj.Tensor{tn}}
		err := obj.ValidateHost(&h)
		if exact != (err == nil) {
			t.Fatalf("iteration %d: %dx%d blocks %+v: each element once %v, ValidateHost: %v", iter, rows, cols, tn.Blocks, exact, err)
		}
		if err != nil {
			continue
		}
		page := make([]byte, off)
		data := ramp(rows * cols)
		if err := tn.Scatter(page, data); err != nil {
			t.Fatalf("iteration %d: Scatter: %v", iter, err)
		}
		got, err := tn.Gather(page)
		if err != nil {
			t.Fatalf("iteration %d: Gather: %v", iter, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("iteration %d: Gather(Scatter(data)) differs", iter)
		}
	}
}

func TestInt64Narrowed(t *testing.T) {
	tt := obj.Tensor{Name: "ids", DType: "int64", Shape: []int64{3}}
	page := make([]byte, 16)
	data := make([]byte, 24)
	for i, v := range []int64{5, -2, 1 << 31} {
		for b := 0; b < 8; b++ {
			data[8*i+b] = byte(uint64(v) >> (8 * b))
		}
	}
	err := tt.Scatter(page, data)
	if err == nil || !strings.Contains(err.Error(), "element 2 is 2147483648, outside the int32 range") {
		t.Fatalf("Scatter error %v, want the out-of-range element", err)
	}
	data = data[:16]
	tt.Shape = []int64{2}
	if err := tt.Scatter(page, data); err != nil {
		t.Fatal(err)
	}
	if got := page[:8]; string(got) != string([]byte{5, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff}) {
		t.Errorf("page %x, want int32 5, -2", got)
	}
	back, err := tt.Gather(page)
	if err != nil || string(back) != string(data) {
		t.Errorf("Gather = %x, %v, want %x", back, err, data)
	}
}
