package obj

// The encoders and decoders of the parts an object shares with the
// package format (ipu.local/formats/ipuexe), which embeds them.

import (
	"ipu.local/formats/obj/wire"
)

// CompressMin is the smallest code or data segment EncodeSegments
// compresses.
const CompressMin = 256

// Segment data encodings.
const (
	encRaw  = 0
	encZstd = 1
	encRef  = 2 // the data of an earlier tile's (image's) segment
)

// refBytes is the data of a reference: its group and segment, uint32
// each.
const refBytes = 8

// Smallest encodings, used to bound counts before allocating.
const (
	minSegment  = 4 + 1 + 1 + 4 + 4 + 4
	minSymbol   = 4 + 4 + 4 + 1
	minTransfer = 4 + 8 + 4 + 4 + 4
	minPhase    = 1 + 4
	minPage     = 1 + 4
	minTensor   = 4 + 4 + 4 + 1 + 4 + 8 + 4
	minBlock    = 7*4 + 1 + 1
	minRegWrite = 4 + 4 + 4
	minTile     = 4 + 4 + 4 + 4 + 4
)

// EncodeSegments appends segments. The segments refs names (by number)
// are stored as those references (see FindRefs). With compress, other
// code and data segments of at least CompressMin bytes are stored as a
// zstd frame when that is smaller.
func EncodeSegments(e *wire.Encoder, segs []Segment, compress bool, refs map[int]Ref) {
	e.U32(uint32(len(segs)))
	for i := range segs {
		s := &segs[i]
		e.String(s.Name)
		e.U8(uint8(s.Kind))
		data, enc := s.Data, uint8(encRaw)
		r, isRef := refs[i]
		if s.Kind == BSS {
			data = nil
		} else if isRef {
			data, enc = encodeRef(r), encRef
		} else if compress && len(data) >= CompressMin {
			if z := wire.Compress(data); len(z) < len(data) {
				data, enc = z, encZstd
			}
		}
		e.U8(enc)
		e.U32(s.Addr)
		e.U32(s.Size)
		if compress {
			// An object's tile (encodeTiles) holds its data by reference
			// until the file is written: no copy as the encoder's buffer
			// grows, and none to join the tile's pieces.
			e.BytesShared(data)
		} else {
			e.Bytes(data)
		}
	}
}

// DecodeSegments reads what EncodeSegments wrote; the references it
// returns are to be resolved (ResolveRefs) against earlier groups. A
// segment stored raw shares the input's bytes (capped: appending
// copies), so the caller must not change them while the segments are in
// use; decompression allocates at most the declared size.
func DecodeSegments(d *wire.Decoder) ([]Segment, []PendingRef) {
	n := d.Count("segment", minSegment)
	if n == 0 {
		return nil, nil
	}
	var pend []PendingRef
	segs := make([]Segment, n)
	var total uint64 // bounds what the tile's segments may decompress to
	for i := range segs {
		s := &segs[i]
		s.Name = d.String("segment name")
		kindOff := d.Off()
		s.Kind = SegKind(d.U8("segment kind"))
		encOff := d.Off()
		enc := d.U8("segment encoding")
		s.Addr = d.U32("segment addr")
		sizeOff := d.Off()
		s.Size = d.U32("segment size")
		nOff := d.Off()
		raw := d.Bytes("segment")
		stored := uint32(len(raw))
		if d.Err() != nil {
			return nil, nil
		}
		if s.Kind > BSS {
			d.Failf(kindOff, "segment %d %q: unknown kind %d", i, s.Name, s.Kind)
			return nil, nil
		}
		if s.Size > MaxTileMemory {
			d.Failf(sizeOff, "segment %d %q: size %d exceeds tile memory (%d bytes)", i, s.Name, s.Size, MaxTileMemory)
			return nil, nil
		}
		if total += uint64(s.Size); total > MaxTileMemory {
			d.Failf(sizeOff, "segment %d %q: segments total %d bytes, more than tile memory (%d bytes)", i, s.Name, total, MaxTileMemory)
			return nil, nil
		}
		switch {
		case s.Kind == BSS:
			if enc != encRaw || stored != 0 {
				d.Failf(nOff, "segment %d %q: bss segment carries %d bytes of data", i, s.Name, stored)
				return nil, nil
			}
		case enc == encRaw:
			if stored != s.Size {
				d.Failf(nOff, "segment %d %q: size %d but %d bytes of data", i, s.Name, s.Size, stored)
				return nil, nil
			}
			if stored > 0 {
				s.Data = raw[:len(raw):len(raw)] // shared: the weights are most of an object
			}
		case enc == encZstd:
			data, err := wire.Decompress(raw, int(s.Size))
			if err != nil {
				d.Failf(nOff+4, "segment %d %q: %v", i, s.Name, err)
				return nil, nil
			}
			if len(data) > 0 {
				s.Data = data
			}
		case enc == encRef:
			if stored != refBytes {
				d.Failf(nOff, "segment %d %q: a reference of %d bytes, not %d", i, s.Name, stored, refBytes)
				return nil, nil
			}
			pend = append(pend, PendingRef{Seg: i, Ref: decodeRef(raw), Off: nOff + 4})
		default:
			d.Failf(encOff, "segment %d %q: unknown encoding %d", i, s.Name, enc)
			return nil, nil
		}
	}
	return segs, pend
}

// EncodeSymbols appends symbols.
func EncodeSymbols(e *wire.Encoder, syms []Symbol) {
	e.U32(uint32(len(syms)))
	for _, s := range syms {
		e.String(s.Name)
		e.U32(s.Addr)
		e.U32(s.Size)
		var flags uint8
		if s.Code {
			flags |= 1
		}
		e.U8(flags)
	}
}

// DecodeSymbols reads what EncodeSymbols wrote.
func DecodeSymbols(d *wire.Decoder) []Symbol {
	n := d.Count("symbol", minSymbol)
	if n == 0 {
		return nil
	}
	syms := make([]Symbol, n)
	for i := range syms {
		s := &syms[i]
		s.Name = d.String("symbol name")
		s.Addr = d.U32("symbol addr")
		s.Size = d.U32("symbol size")
		off := d.Off()
		flags := d.U8("symbol flags")
		if flags&^1 != 0 {
			d.Failf(off, "symbol %d %q: unknown flags %#x", i, s.Name, flags)
		}
		s.Code = flags&1 != 0
	}
	if d.Err() != nil {
		return nil
	}
	return syms
}

// EncodeTransfers appends transfers.
func EncodeTransfers(e *wire.Encoder, xs []Transfer) {
	e.U32(uint32(len(xs)))
	for _, x := range xs {
		e.U32(uint32(x.Phase))
		e.I64(x.Cycle)
		e.U32(uint32(x.Dst))
		e.U32(uint32(x.DstCount))
		e.U32(uint32(x.Words))
	}
}

// DecodeTransfers reads what EncodeTransfers wrote.
func DecodeTransfers(d *wire.Decoder) []Transfer {
	n := d.Count("transfer", minTransfer)
	if n == 0 {
		return nil
	}
	xs := make([]Transfer, n)
	for i := range xs {
		x := &xs[i]
		x.Phase = d.Int("transfer phase")
		off := d.Off()
		x.Cycle = d.I64("transfer cycle")
		if x.Cycle < 0 {
			d.Failf(off, "transfer %d: cycle %d is negative", i, x.Cycle)
		}
		x.Dst = d.Int("transfer dst")
		x.DstCount = d.Int("transfer dst count")
		x.Words = d.Int("transfer words")
	}
	if d.Err() != nil {
		return nil
	}
	return xs
}

// EncodeHost appends a host program.
func EncodeHost(e *wire.Encoder, h *HostProgram) {
	e.U32(uint32(len(h.Phases)))
	for _, p := range h.Phases {
		e.U8(uint8(p.Kind))
		e.String(p.Name)
	}
	e.U32(uint32(len(h.Pages)))
	for _, p := range h.Pages {
		e.U8(p.ID)
		e.U32(p.Bytes)
	}
	for _, ts := range [][]Tensor{h.Inputs, h.Outputs} {
		e.U32(uint32(len(ts)))
		for _, t := range ts {
			e.String(t.Name)
			e.String(t.DType)
			e.U32(uint32(len(t.Shape)))
			for _, dim := range t.Shape {
				e.I64(dim)
			}
			e.U8(t.Page)
			e.U32(t.Offset)
			e.I64(t.Accumulate)
			e.U32(uint32(len(t.Blocks)))
			for _, b := range t.Blocks {
				for _, v := range []uint32{b.Offset, b.R0, b.R1, b.C0, b.C1, b.Rows, b.Cols} {
					e.U32(v)
				}
				var flags uint8
				if b.Transpose {
					flags |= blockTranspose
				}
				e.U8(flags)
				e.U8(uint8(b.Order))
			}
		}
	}
	e.BytesRef(h.Model)
	// Branches last, only when there are any: a host program written
	// before branching ends with the model.
	if len(h.Branches) > 0 {
		e.U32(uint32(len(h.Branches)))
		for _, b := range h.Branches {
			e.String(b.If)
			e.U32(uint32(b.CondTile))
			e.U32(b.CondAddr)
			e.U8(b.CondBytes)
			for _, v := range []int{b.Then[0], b.Then[1], b.Else[0], b.Else[1]} {
				e.U32(uint32(v))
			}
		}
	}
}

// minBranch is the smallest encoded branch.
const minBranch = 4 + 4 + 4 + 1 + 16

// Block flags.
const blockTranspose = 1

// DecodeHost reads what EncodeHost wrote; the program must validate
// (ValidateHost), or the error is at the host program's first byte.
// The model shares the decoder's bytes.
func DecodeHost(d *wire.Decoder) HostProgram {
	start := d.Off()
	var h HostProgram
	if n := d.Count("host phase", minPhase); n > 0 {
		h.Phases = make([]Phase, n)
		for i := range h.Phases {
			off := d.Off()
			k := PhaseKind(d.U8("host phase kind"))
			if k > HostExchange {
				d.Failf(off, "host phase %d: unknown kind %d", i, k)
			}
			h.Phases[i] = Phase{Kind: k, Name: d.String("host phase name")}
		}
	}
	if n := d.Count("host page", minPage); n > 0 {
		h.Pages = make([]Page, n)
		for i := range h.Pages {
			h.Pages[i] = Page{ID: d.U8("host page id"), Bytes: d.U32("host page bytes")}
		}
	}
	h.Inputs = decodeTensors(d, "host input")
	h.Outputs = decodeTensors(d, "host output")
	modelOff := d.Off()
	if model := d.Bytes("host model"); len(model) > MaxModelBytes {
		d.Failf(modelOff, "host model: %d bytes, more than %d", len(model), MaxModelBytes)
	} else if len(model) > 0 {
		h.Model = model[:len(model):len(model)] // shared, as raw segments are
	}
	if d.Left() > 0 {
		if n := d.Count("host branch", minBranch); n > 0 {
			h.Branches = make([]Branch, n)
			for i := range h.Branches {
				b := &h.Branches[i]
				b.If = d.String("host branch if")
				b.CondTile = int(d.U32("host branch condition tile"))
				b.CondAddr = d.U32("host branch condition address")
				b.CondBytes = d.U8("host branch condition bytes")
				for _, v := range []*int{&b.Then[0], &b.Then[1], &b.Else[0], &b.Else[1]} {
					*v = int(d.U32("host branch phase"))
				}
			}
		}
	}
	if d.Err() == nil {
		if err := ValidateHost(&h); err != nil {
			d.Failf(start, "%v", err)
		}
	}
	if d.Err() != nil {
		return HostProgram{}
	}
	return h
}

func decodeTensors(d *wire.Decoder, what string) []Tensor {
	n := d.Count(what, minTensor)
	if n == 0 {
		return nil
	}
	ts := make([]Tensor, n)
	for i := range ts {
		t := &ts[i]
		t.Name = d.String(what + " name")
		t.DType = d.String(what + " dtype")
		if rank := d.Count(what+" dimension", 8); rank > 0 {
			t.Shape = make([]int64, rank)
			for j := range t.Shape {
				off := d.Off()
				t.Shape[j] = d.I64(what + " dimension")
				if t.Shape[j] < 0 {
					d.Failf(off, "%s %d %q: dimension %d is %d", what, i, t.Name, j, t.Shape[j])
				}
			}
		}
		t.Page = d.U8(what + " page")
		t.Offset = d.U32(what + " offset")
		accOff := d.Off()
		t.Accumulate = d.I64(what + " accumulate")
		if t.Accumulate < 0 {
			d.Failf(accOff, "%s %d %q: accumulate is %d", what, i, t.Name, t.Accumulate)
		}
		if n := d.Count(what+" block", minBlock); n > 0 {
			t.Blocks = make([]Block, n)
			for j := range t.Blocks {
				b := &t.Blocks[j]
				for _, v := range []*uint32{&b.Offset, &b.R0, &b.R1, &b.C0, &b.C1, &b.Rows, &b.Cols} {
					*v = d.U32(what + " block")
				}
				off := d.Off()
				if flags := d.U8(what + " block flags"); flags&^blockTranspose != 0 {
					d.Failf(off, "%s %q block %d: unknown flags %#x", what, t.Name, j, flags)
				} else {
					b.Transpose = flags&blockTranspose != 0
				}
				b.Order = Order(d.U8(what + " block order"))
			}
		}
		if d.Err() != nil {
			return nil
		}
	}
	return ts
}

// EncodeConfig appends register writes.
func EncodeConfig(e *wire.Encoder, ws []RegWrite) {
	e.U32(uint32(len(ws)))
	for _, w := range ws {
		e.U32(w.Tile)
		e.U32(w.Reg)
		e.U32(w.Value)
	}
}

// DecodeConfig reads what EncodeConfig wrote.
func DecodeConfig(d *wire.Decoder) []RegWrite {
	n := d.Count("register write", minRegWrite)
	if n == 0 {
		return nil
	}
	ws := make([]RegWrite, n)
	for i := range ws {
		ws[i] = RegWrite{Tile: d.U32("register write tile"), Reg: d.U32("register write reg"), Value: d.U32("register write value")}
	}
	if d.Err() != nil {
		return nil
	}
	return ws
}
