package plan

// A product step's split: its block grid and, cut in two, its rest.

// Split is the block counts of a matrix product [...,M,K]x[...,K,N]: B
// batch blocks, M row, N column and K reduction blocks; row blocks start
// at multiples of Align rows (0: 4, the A panels' groups; 16 when a later
// product packs the result as a transposed B operand).
type Split struct {
	B     int `json:"b,omitempty"`
	M     int `json:"m"`
	N     int `json:"n"`
	K     int `json:"k"`
	Align int `json:"align,omitempty"`
	// NAlign: column blocks start at multiples of NAlign columns (0: 16,
	// the B panels'; a multiple of 16 keeps blocks inside the heads a
	// later reshape splits the columns into).
	NAlign int `json:"nalign,omitempty"`
	// Order "b" numbers the blocks with the row blocks innermost (the
	// tiles sharing a B block contiguous); "" the column blocks (the tiles
	// sharing an A block).
	Order string `json:"order,omitempty"`
	// Parts "cols": a k split's reduce-scatter cuts a block with fewer
	// row groups than k blocks into column parts too (each of its row
	// groups into as many parts of whole 16-column panels as the k blocks
	// allow, libs/layout Split.PartBox), so that more of its tiles share
	// the sums; each part's owner adds its own partial sum first, then
	// the others in k order. "": row parts only (k blocks past the row
	// groups own nothing). In a search state's decision it is the
	// search's choice; a plan step's split says "cols" only where some
	// block is cut.
	Parts string `json:"parts,omitempty"`
	// Rest cuts the product in two along the rows or the columns: the
	// M x N grid covers the axis up to Rest.At, Rest's grid the rest
	// (libs/layout Split). Nil: one grid.
	Rest *Rest `json:"rest,omitempty"`
}

// Rest is the second part of a cut split: the rows (Axis "m") or the
// columns ("n") from At on, in M x N blocks; its tiles follow the first
// part's in each batch block. At is a multiple of the cut axis' alignment
// (Align rows, NAlign columns).
type Rest struct {
	Axis string `json:"axis"`
	At   int    `json:"at"`
	M    int    `json:"m"`
	N    int    `json:"n"`
}

// Blocks is the split's block count (its tiles; the factors bounded as
// check bounds them).
func (s *Split) Blocks() int64 {
	n := int64(s.M) * int64(s.N)
	if s.Rest != nil {
		n += int64(s.Rest.M) * int64(s.Rest.N)
	}
	return int64(max(s.B, 1)) * int64(s.K) * n
}

// check validates the split's factors; path names it in errors.
func (s *Split) check(path string) error {
	if s.Align != 0 && s.Align != 4 && s.Align != 8 && s.Align != 16 {
		return errAt(path+".align", "%d (want 4, 8 or 16)", s.Align)
	}
	if s.Order != "" && s.Order != "b" {
		return errAt(path+".order", "%q (want \"\" or \"b\")", s.Order)
	}
	if s.Parts != "" && s.Parts != "cols" {
		return errAt(path+".parts", "%q (want \"\" or \"cols\")", s.Parts)
	}
	if s.NAlign < 0 || s.NAlign%16 != 0 || s.NAlign > 1<<20 {
		return errAt(path+".nalign", "%d (want a multiple of 16)", s.NAlign)
	}
	if s.B < 0 || s.M < 1 || s.N < 1 || s.K < 1 {
		return errAt(path, "factors %d, %d, %d, %d: want at least 1 (b may be 0)", s.B, s.M, s.N, s.K)
	}
	if r := s.Rest; r != nil {
		if r.Axis != "m" && r.Axis != "n" {
			return errAt(path+".rest.axis", "%q (want \"m\" or \"n\")", r.Axis)
		}
		if r.At < 1 || r.At > 1<<30 {
			return errAt(path+".rest.at", "%d (want a positive offset below 2^30)", r.At)
		}
		if r.M < 1 || r.N < 1 || r.M > MaxTiles || r.N > MaxTiles || s.M > MaxTiles || s.N > MaxTiles {
			return errAt(path+".rest", "factors %d, %d (and the split's %d, %d): want at least 1, at most %d", r.M, r.N, s.M, s.N, MaxTiles)
		}
	}
	return nil
}
