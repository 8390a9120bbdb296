package obj

// Host tensor layouts: where each element of a tensor lives in its host
// page, for the host that fills inputs and reads outputs.

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"ipu.local/formats/plan"
)

// ElemSize is the bytes of one element of the tensor's type (a type a
// plan may hold: "float" 4, "float16" 2, the float8 types 1, ...), 0 for
// a type without one here (unknown or sub-byte).
//
// The device computes indices in 32 bits: an int64 tensor is held as
// int32 in its page (4 bytes an element), and a "bool" tensor as FP32
// words 0.0 and 1.0 (plan.DeviceDTypeSize). Scatter narrows int64 data,
// refusing a value outside the int32 range with an error naming the
// tensor, and turns bool bytes into words; Gather converts back.
func (t *Tensor) ElemSize() int { return plan.DeviceDTypeSize(t.DType) }

// narrow returns int64 data as the int32 the page holds.
func (t *Tensor) narrow(data []byte) ([]byte, error) {
	if len(data)%8 != 0 {
		return nil, layoutErrorf(-1, "%d bytes of int64 data", len(data))
	}
	out := make([]byte, len(data)/2)
	for i := 0; i < len(data)/8; i++ {
		v := int64(binary.LittleEndian.Uint64(data[8*i:]))
		if v < math.MinInt32 || v > math.MaxInt32 {
			return nil, layoutErrorf(-1, "element %d is %d, outside the int32 range the device holds int64 values in", i, v)
		}
		binary.LittleEndian.PutUint32(out[4*i:], uint32(int32(v)))
	}
	return out, nil
}

// widen returns the int32 data of an int64 tensor's page as int64.
func widen(data []byte) []byte {
	out := make([]byte, 2*len(data))
	for i := 0; i < len(data)/4; i++ {
		binary.LittleEndian.PutUint64(out[8*i:], uint64(int64(int32(binary.LittleEndian.Uint32(data[4*i:])))))
	}
	return out
}

// boolWords returns raw bool bytes as the device's FP32 words.
func boolWords(raw []byte) []byte {
	out := make([]byte, 4*len(raw))
	for i, b := range raw {
		if b != 0 {
			out[4*i+2], out[4*i+3] = 0x80, 0x3f // 1.0f little-endian
		}
	}
	return out
}

// boolBytes returns the device's words as raw bool bytes (1 for a
// non-zero word).
func boolBytes(words []byte) []byte {
	out := make([]byte, len(words)/4)
	for i := range out {
		if words[4*i]|words[4*i+1]|words[4*i+2]|words[4*i+3] != 0 {
			out[i] = 1
		}
	}
	return out
}

// Matrix returns the dimensions of the tensor's matrix view: rows is the
// product of all axes but the last, cols the last axis; a rank-0 tensor
// is 1x1, a rank-1 tensor 1 x n. It fails when a dimension is negative or
// the element count does not fit in 63 bits.
func (t *Tensor) Matrix() (rows, cols uint64, err error) {
	rows, cols = 1, 1
	for i, d := range t.Shape {
		if d < 0 {
			return 0, 0, fmt.Errorf("dimension %d is %d", i, d)
		}
		if i == len(t.Shape)-1 {
			cols = uint64(d)
			break
		}
		hi, lo := bits.Mul64(rows, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, 0, fmt.Errorf("shape %v has too many elements", t.Shape)
		}
		rows = lo
	}
	if hi, lo := bits.Mul64(rows, cols); hi != 0 || lo > math.MaxInt64 {
		return 0, 0, fmt.Errorf("shape %v has too many elements", t.Shape)
	}
	return rows, cols, nil
}

// rawBytes is the size of the tensor's row-major raw data.
func (t *Tensor) rawBytes(size int) (uint64, error) {
	rows, cols, err := t.Matrix()
	if err != nil {
		return 0, err
	}
	hi, n := bits.Mul64(rows*cols, uint64(size))
	if hi != 0 || n > math.MaxInt64 {
		return 0, fmt.Errorf("shape %v has too many bytes", t.Shape)
	}
	return n, nil
}

// Bytes is the block's page span: Rows*Cols*elemSize (saturating at the
// largest uint64).
func (b *Block) Bytes(elemSize int) uint64 {
	hi, n := bits.Mul64(uint64(b.Rows)*uint64(b.Cols), uint64(elemSize))
	if hi != 0 {
		return math.MaxUint64
	}
	return n
}

// Index is the grid position, in elements from the block's Offset, of
// region element (r, c).
func (b *Block) Index(r, c uint32) uint64 { return b.rowPart(r) + b.colPart(c) }

// Every order's index separates into a row part and a column part.
func (b *Block) rowPart(r uint32) uint64 {
	switch b.Order {
	case APanel:
		return uint64(r/4)*4*uint64(b.Cols) + uint64(r%4)
	case BPanel:
		return 16 * uint64(r)
	}
	return uint64(r) * uint64(b.Cols)
}

func (b *Block) colPart(c uint32) uint64 {
	switch b.Order {
	case APanel:
		return 4 * uint64(c)
	case BPanel:
		return uint64(c/16)*16*uint64(b.Rows) + uint64(c%16)
	}
	return uint64(c)
}

// matrixRegion is the block's region in the tensor's (untransposed)
// matrix view.
func (b *Block) matrixRegion() (r0, r1, c0, c1 uint64) {
	if b.Transpose {
		return uint64(b.C0), uint64(b.C1), uint64(b.R0), uint64(b.R1)
	}
	return uint64(b.R0), uint64(b.R1), uint64(b.C0), uint64(b.C1)
}

// Span is the page byte range [lo, hi) the tensor uses: its blocks', or
// its row-major bytes at Offset (empty when its element type has no size
// here or its shape is invalid).
func (t *Tensor) Span() (lo, hi uint64) {
	size := t.ElemSize()
	if len(t.Blocks) == 0 {
		n, err := t.rawBytes(size)
		if err != nil {
			n = 0
		}
		return uint64(t.Offset), uint64(t.Offset) + n
	}
	lo = math.MaxUint64
	for i := range t.Blocks {
		b := &t.Blocks[i]
		lo = min(lo, uint64(b.Offset))
		end := b.Bytes(size)
		if end > math.MaxUint64-uint64(b.Offset) {
			end = math.MaxUint64
		} else {
			end += uint64(b.Offset)
		}
		hi = max(hi, end)
	}
	return lo, hi
}

// LayoutError is a tensor layout that does not hold: Block is the index
// of the block at fault, or -1 when the fault is the tensor's.
type LayoutError struct {
	Block int
	Msg   string
}

func (e *LayoutError) Error() string {
	if e.Block < 0 {
		return e.Msg
	}
	return fmt.Sprintf("block %d: %s", e.Block, e.Msg)
}

func layoutErrorf(block int, format string, args ...any) error {
	return &LayoutError{Block: block, Msg: fmt.Sprintf(format, args...)}
}

// checkBlocks checks each block of t on its own against a page of
// pageBytes bytes and returns the element size and matrix view.
func (t *Tensor) checkBlocks(pageBytes uint64) (size int, rows, cols uint64, err error) {
	size = t.ElemSize()
	if size == 0 {
		return 0, 0, 0, layoutErrorf(-1, "element type %q cannot be laid out in blocks", t.DType)
	}
	if t.Offset != 0 {
		return 0, 0, 0, layoutErrorf(-1, "offset %#x with blocks (want 0)", t.Offset)
	}
	rows, cols, err = t.Matrix()
	if err != nil {
		return 0, 0, 0, layoutErrorf(-1, "%v", err)
	}
	for i := range t.Blocks {
		if err := t.Blocks[i].check(i, size, rows, cols, pageBytes); err != nil {
			return 0, 0, 0, err
		}
	}
	return size, rows, cols, nil
}

// check checks block i of a tensor whose matrix view is rows x cols.
func (b *Block) check(i, size int, rows, cols, pageBytes uint64) error {
	if b.Order > BPanel {
		return layoutErrorf(i, "unknown order %d", b.Order)
	}
	view := "matrix view"
	if b.Transpose {
		rows, cols = cols, rows
		view = "transposed matrix view"
	}
	if b.R0 >= b.R1 || uint64(b.R1) > rows {
		return layoutErrorf(i, "rows [%d,%d) not a non-empty range of the %dx%d %s", b.R0, b.R1, rows, cols, view)
	}
	if b.C0 >= b.C1 || uint64(b.C1) > cols {
		return layoutErrorf(i, "cols [%d,%d) not a non-empty range of the %dx%d %s", b.C0, b.C1, rows, cols, view)
	}
	if b.Rows < b.R1-b.R0 || b.Cols < b.C1-b.C0 {
		return layoutErrorf(i, "grid %dx%d smaller than the region %dx%d", b.Rows, b.Cols, b.R1-b.R0, b.C1-b.C0)
	}
	if b.Order == APanel && b.Rows%4 != 0 {
		return layoutErrorf(i, "apanel grid rows %d not a multiple of 4", b.Rows)
	}
	if b.Order == BPanel && b.Cols%16 != 0 {
		return layoutErrorf(i, "bpanel grid cols %d not a multiple of 16", b.Cols)
	}
	n := b.Bytes(size)
	if n > math.MaxUint32 {
		return layoutErrorf(i, "grid %dx%d of %d-byte elements exceeds 4 GiB", b.Rows, b.Cols, size)
	}
	if end := uint64(b.Offset) + n; end > pageBytes {
		return layoutErrorf(i, "bytes [%#x,%#x) overrun the page of %d bytes", b.Offset, end, pageBytes)
	}
	return nil
}

// rect is a block's region in the matrix view.
type rect struct {
	r0, r1, c0, c1 uint64
	block          int
}

type interval struct{ lo, hi uint64 }

// checkCover checks that the blocks of a tensor with a rows x cols matrix
// view, each already checked, cover every element exactly once. It sweeps
// the rows: at each row where blocks end or start, the columns the
// starting blocks cover must be exactly those the ending ones freed, so
// that the live blocks always tile the columns once. That takes
// O(n log n) in the number of blocks, whatever their sizes.
func checkCover(blocks []Block, rows, cols uint64) error {
	if rows == 0 || cols == 0 {
		return layoutErrorf(-1, "blocks for an empty tensor")
	}
	rs := make([]rect, len(blocks))
	for i := range blocks {
		r0, r1, c0, c1 := blocks[i].matrixRegion()
		rs[i] = rect{r0, r1, c0, c1, i}
	}
	starts := slices.Clone(rs)
	slices.SortFunc(starts, func(a, b rect) int { return cmp.Or(cmp.Compare(a.r0, b.r0), cmp.Compare(a.c0, b.c0)) })
	ends := rs
	slices.SortFunc(ends, func(a, b rect) int { return cmp.Or(cmp.Compare(a.r1, b.r1), cmp.Compare(a.c0, b.c0)) })

	var freed, taken []interval
	si, ei := 0, 0
	for y := uint64(0); y < rows; {
		freed = freed[:0]
		if y == 0 {
			freed = append(freed, interval{0, cols})
		}
		for ; ei < len(ends) && ends[ei].r1 == y; ei++ {
			freed = appendMerged(freed, ends[ei].c0, ends[ei].c1)
		}
		taken = taken[:0]
		first := si
		for ; si < len(starts) && starts[si].r0 == y; si++ {
			s := &starts[si]
			if si > first && s.c0 < starts[si-1].c1 {
				return layoutErrorf(s.block, "element (%d, %d) of the matrix view is also in block %d", y, s.c0, starts[si-1].block)
			}
			taken = appendMerged(taken, s.c0, s.c1)
		}
		if c, extra, ok := firstDifference(freed, taken); !ok {
			if !extra {
				return layoutErrorf(-1, "element (%d, %d) of the %dx%d matrix view is not in any block", y, c, rows, cols)
			}
			// A starting block takes a column that a live block holds.
			var a int
			for _, s := range starts[first:si] {
				if s.c0 <= c && c < s.c1 {
					a = s.block
				}
			}
			for _, o := range rs {
				if o.block != a && o.r0 < y && y < o.r1 && o.c0 <= c && c < o.c1 {
					return layoutErrorf(a, "element (%d, %d) of the matrix view is also in block %d", y, c, o.block)
				}
			}
			return layoutErrorf(a, "element (%d, %d) of the matrix view is in another block too", y, c)
		}
		next := rows
		if si < len(starts) {
			next = min(next, starts[si].r0)
		}
		if ei < len(ends) {
			next = min(next, ends[ei].r1)
		}
		y = next
	}
	return nil
}

// appendMerged appends [lo, hi) to sorted disjoint intervals, joining it
// with the last when they touch.
func appendMerged(s []interval, lo, hi uint64) []interval {
	if n := len(s); n > 0 && s[n-1].hi >= lo {
		s[n-1].hi = max(s[n-1].hi, hi)
		return s
	}
	return append(s, interval{lo, hi})
}

// firstDifference compares two unions of merged intervals: ok when they
// are equal, else the first column c in one and not the other, and
// whether it is in b (extra) or only in a.
func firstDifference(a, b []interval) (c uint64, extra, ok bool) {
	for i := 0; ; i++ {
		switch {
		case i == len(a) && i == len(b):
			return 0, false, true
		case i == len(a):
			return b[i].lo, true, false
		case i == len(b):
			return a[i].lo, false, false
		}
		x, y := a[i], b[i]
		switch {
		case x.lo != y.lo:
			return min(x.lo, y.lo), y.lo < x.lo, false
		case x.hi != y.hi:
			return min(x.hi, y.hi), y.hi > x.hi, false
		}
	}
}

// colOffsets returns, for each column c of the block's region, the byte
// distance in the page from region element (r, 0) to (r, c), reusing buf.
func (b *Block) colOffsets(size int, buf []uint64) []uint64 {
	buf = buf[:0]
	for c := range b.C1 - b.C0 {
		buf = append(buf, b.colPart(c)*uint64(size))
	}
	return buf
}

// rowAt returns the byte positions of region element (r, 0) in the page
// and in the row-major data of a tensor with cols columns, and the data
// step from (r, c) to (r, c+1).
func (b *Block) rowAt(r uint32, size int, cols uint64) (page, data, step uint64) {
	page = uint64(b.Offset) + b.rowPart(r)*uint64(size)
	if b.Transpose {
		return page, (uint64(b.C0)*cols + uint64(b.R0+r)) * uint64(size), cols * uint64(size)
	}
	return page, (uint64(b.R0+r)*cols + uint64(b.C0)) * uint64(size), uint64(size)
}

// Scatter writes the tensor's raw row-major little-endian data into its
// host page (the whole page: index 0 is page offset 0): into every block,
// padding zeroed, or at Offset when there are no blocks.
func (t *Tensor) Scatter(page, data []byte) error {
	switch t.DType {
	case "int64":
		var err error
		if data, err = t.narrow(data); err != nil {
			return err
		}
	case "bool":
		data = boolWords(data)
	}
	if len(t.Blocks) == 0 {
		dst, err := t.flat(page)
		if err != nil {
			return err
		}
		if len(data) != len(dst) {
			return t.dataSizeError(len(data), uint64(len(dst)))
		}
		copy(dst, data)
		return nil
	}
	size, _, cols, err := t.checkBlocks(uint64(len(page)))
	if err != nil {
		return err
	}
	want, err := t.rawBytes(size)
	if err != nil {
		return layoutErrorf(-1, "%v", err)
	}
	if uint64(len(data)) != want {
		return t.dataSizeError(len(data), want)
	}
	// Zero every block before filling any, so that blocks sharing bytes
	// keep each other's elements.
	for i := range t.Blocks {
		b := &t.Blocks[i]
		clear(page[b.Offset : uint64(b.Offset)+b.Bytes(size)])
	}
	sz := uint64(size)
	var offs []uint64
	for i := range t.Blocks {
		b := &t.Blocks[i]
		if b.Order == RowMajor && !b.Transpose {
			n := uint64(b.C1-b.C0) * sz
			for r := range b.R1 - b.R0 {
				p, d, _ := b.rowAt(r, size, cols)
				copy(page[p:p+n], data[d:d+n])
			}
			continue
		}
		offs = b.colOffsets(size, offs)
		for r := range b.R1 - b.R0 {
			p, d, step := b.rowAt(r, size, cols)
			for _, off := range offs {
				copy(page[p+off:p+off+sz], data[d:d+sz])
				d += step
			}
		}
	}
	return nil
}

// Gather reads the tensor's raw row-major little-endian data from its
// host page (the whole page): from its blocks, which must cover every
// element exactly once, or from Offset when there are no blocks.
func (t *Tensor) Gather(page []byte) ([]byte, error) {
	switch t.DType {
	case "int64":
		out, err := t.gather(page)
		if err != nil {
			return nil, err
		}
		return widen(out), nil
	case "bool":
		w, err := t.gather(page)
		if err != nil {
			return nil, err
		}
		return boolBytes(w), nil
	}
	return t.gather(page)
}

func (t *Tensor) gather(page []byte) ([]byte, error) {
	if len(t.Blocks) == 0 {
		src, err := t.flat(page)
		if err != nil {
			return nil, err
		}
		return append([]byte(nil), src...), nil
	}
	size, rows, cols, err := t.checkBlocks(uint64(len(page)))
	if err != nil {
		return nil, err
	}
	if err := checkCover(t.Blocks, rows, cols); err != nil {
		return nil, err
	}
	// Covered exactly once, so the data is no larger than the blocks,
	// each of which lies in the page.
	sz := uint64(size)
	out := make([]byte, rows*cols*sz)
	var offs []uint64
	for i := range t.Blocks {
		b := &t.Blocks[i]
		offs = b.colOffsets(size, offs)
		for r := range b.R1 - b.R0 {
			p, d, step := b.rowAt(r, size, cols)
			for _, off := range offs {
				copy(out[d:d+sz], page[p+off:p+off+sz])
				d += step
			}
		}
	}
	return out, nil
}

// flat returns the bytes at Offset of a tensor without blocks.
func (t *Tensor) flat(page []byte) ([]byte, error) {
	size := t.ElemSize()
	if size == 0 {
		return nil, layoutErrorf(-1, "element type %q has no size here", t.DType)
	}
	n, err := t.rawBytes(size)
	if err != nil {
		return nil, layoutErrorf(-1, "%v", err)
	}
	if end := uint64(t.Offset) + n; end > uint64(len(page)) {
		return nil, layoutErrorf(-1, "bytes [%#x,%#x) overrun the page of %d bytes", t.Offset, end, len(page))
	}
	return page[t.Offset : uint64(t.Offset)+n], nil
}

func (t *Tensor) dataSizeError(got int, want uint64) error {
	return layoutErrorf(-1, "%d bytes of data, want %d (%s %v)", got, want, t.DType, t.Shape)
}
