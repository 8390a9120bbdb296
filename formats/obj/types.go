package obj

// Object is a linked program for every tile of one architecture: the
// linker's output and ipu-pack's input.
type Object struct {
	// Arch is the architecture preset name ("ipu21").
	Arch string
	// Compiler is the version of the toolchain that wrote the object.
	Compiler string
	// Source is the fingerprint (hex SHA-256) of what the object was made
	// from: the plan, or the assembly source.
	Source string
	// Tiles holds the tiles that have a program, in increasing Index order.
	// Tiles not listed run nothing (ipu-pack gives them the idle image).
	Tiles []Tile
	// Host is the host program: BSP phases, host pages, inputs, outputs.
	Host HostProgram
	// Config is the device configuration: register writes replayed at load,
	// in order.
	Config []RegWrite
}

// Tile is one tile's program.
type Tile struct {
	Index int
	// Entry is the supervisor's first PC.
	Entry uint32
	// Segments in increasing address order, non-overlapping.
	Segments []Segment
	// Symbols in increasing address order.
	Symbols []Symbol
	// Exchange lists the tile's compiled exchange transfers (the sends it
	// makes), for validation and dumps; the instructions are in the code.
	Exchange []Transfer
}

// SegKind says what a segment holds.
type SegKind uint8

const (
	Code SegKind = iota // instructions: executable range, read only
	Data                // initialised data
	BSS                 // zero-initialised data: Size bytes, no Data
)

func (k SegKind) String() string {
	switch k {
	case Code:
		return "code"
	case Data:
		return "data"
	case BSS:
		return "bss"
	}
	return "segkind?"
}

// Segment is a run of tile memory.
type Segment struct {
	Name string
	Kind SegKind
	Addr uint32
	Size uint32 // == len(Data) for Code and Data
	Data []byte
}

// Symbol names an address on one tile.
type Symbol struct {
	Name string
	Addr uint32
	Size uint32
	Code bool // a function (true) or a data object (false)
}

// Transfer is one compiled send: at Cycle of superstep Phase, tile sends
// Words 32-bit words to tiles [Dst, Dst+DstCount). A strided send (every
// s-th tile, libs/isa send.go) is recorded as one Transfer per receiving
// tile, each with the send's Cycle and a DstCount of 1.
type Transfer struct {
	Phase    int
	Cycle    int64
	Dst      int
	DstCount int
	Words    int
}

// HostProgram is what the host does to run the program.
type HostProgram struct {
	// Phases is the BSP phase list of one run call, in order.
	Phases []Phase
	// Pages are the host exchange pages the session attaches.
	Pages []Page
	// Inputs and Outputs are the named tensors in host pages, in graph
	// input and output order.
	Inputs  []Tensor
	Outputs []Tensor
	// Model is the graph the program computes, for the host reference of
	// ipu-check: the plan's graph encoded as JSON (formats/plan Graph);
	// empty for hand-written assembly. At most MaxModelBytes.
	Model []byte
	// Branches are the Ifs the device branches on, in phase order: a run
	// call executes the phases of one side of each and skips the other's.
	Branches []Branch
}

// Branch is an If the tiles branch on: every tile loads the condition
// (after it was multicast to them) and runs the phases of Then when it
// is nonzero, else those of Else. CondTile holds the condition at
// CondAddr (CondBytes bytes: a bool element) for the whole program, so
// that the host can read which side ran.
type Branch struct {
	If        string
	CondTile  int
	CondAddr  uint32
	CondBytes uint8
	// Then and Else are phase index ranges [lo, hi) of Phases; Else
	// starts where Then ends.
	Then, Else [2]int
}

// Taken reports whether a condition's bytes (CondBytes of them, little
// endian, as read from CondTile's memory at CondAddr) select the then
// side: a bool element that is not zero (a 4-byte bool is a float word,
// of which -0.0 is false).
func (b *Branch) Taken(word []byte) bool {
	var v uint32
	for i := 0; i < int(b.CondBytes) && i < len(word); i++ {
		v |= uint32(word[i]) << (8 * i)
	}
	if b.CondBytes == 4 {
		v <<= 1
	}
	return v != 0
}

// PhasePath returns the indices into Phases of the phases a run call
// executes when each branch k takes its then side exactly when then[k]
// (the run's phases in order are these ones).
func (h *HostProgram) PhasePath(then []bool) []int {
	var out []int
	for i := range h.Phases {
		on := true
		for k, b := range h.Branches {
			switch {
			case i >= b.Then[0] && i < b.Then[1]:
				on = k < len(then) && then[k]
			case i >= b.Else[0] && i < b.Else[1]:
				on = k < len(then) && !then[k]
			}
		}
		if on {
			out = append(out, i)
		}
	}
	return out
}

// PhaseKind is the kind of one BSP phase.
type PhaseKind uint8

const (
	Compute PhaseKind = iota
	Exchange
	HostExchange
)

func (k PhaseKind) String() string {
	switch k {
	case Compute:
		return "compute"
	case Exchange:
		return "exchange"
	case HostExchange:
		return "host"
	}
	return "phasekind?"
}

// Phase is one superstep of the run call.
type Phase struct {
	Kind PhaseKind
	Name string
}

// Page is a host exchange page: host address Page<<24 | offset.
type Page struct {
	ID    uint8
	Bytes uint32
}

// Tensor places a named tensor in a host page.
type Tensor struct {
	Name   string
	DType  string // ONNX type name: "float", "float16", "float8e4m3fnuz", ...
	Shape  []int64
	Page   uint8
	Offset uint32
	// Accumulate is the longest chain of FP32 additions behind each
	// element (a matrix product's K), from which ipu-check derives the
	// tolerance; 0 for exact results (casts, copies).
	Accumulate int64
	// Blocks, when not empty, is how the host arranges the tensor in the
	// page (Offset is then unused and 0): each block is a region of the
	// tensor's matrix view laid out in one contiguous page range, so that
	// a tile moves it with one host transfer. Empty: the whole tensor
	// row-major at Offset.
	Blocks []Block
}

// Order is the element order of a block.
type Order uint8

const (
	// RowMajor puts region element (r, c) at r*Cols + c.
	RowMajor Order = iota
	// APanel puts it at (r/4)*4*Cols + 4*c + r%4: panels of 4 rows, each
	// column of a panel contiguous (Rows a multiple of 4).
	APanel
	// BPanel puts it at (c/16)*16*Rows + 16*r + c%16: panels of 16
	// columns, each row of a panel contiguous (Cols a multiple of 16).
	BPanel
)

func (o Order) String() string {
	switch o {
	case RowMajor:
		return "rowmajor"
	case APanel:
		return "apanel"
	case BPanel:
		return "bpanel"
	}
	return "order?"
}

// Block is the region [R0,R1) x [C0,C1) of the tensor's matrix view
// (rows: the product of all axes but the last, cols: the last axis; a
// rank-0 tensor is 1x1, rank-1 is 1 x n), or of its transpose when
// Transpose, laid out in Order over a padded Rows x Cols grid (Rows >=
// R1-R0, Cols >= C1-C0) at page offset Offset. Region element (r, c)
// (0-based inside the region) is at byte Offset + size*Index(r, c); grid
// positions outside the region are padding: the host writes zeros there
// for inputs and ignores them for outputs. Blocks of an input may cover
// the same elements several times (each tile fetches its own copy);
// blocks of an output cover every element of the tensor exactly once,
// and no two blocks' byte ranges overlap.
type Block struct {
	Offset         uint32
	R0, R1, C0, C1 uint32
	Rows, Cols     uint32
	Transpose      bool
	Order          Order
}

// RegWrite is one device configuration register write. Tile AllTiles
// writes the register of every tile.
type RegWrite struct {
	Tile  uint32
	Reg   uint32
	Value uint32
}

// AllTiles in RegWrite.Tile addresses every tile.
const AllTiles = 0xFFFFFFFF

// SymbolAt returns the code symbol of syms whose range holds pc (the
// innermost, when ranges nest), or false.
func SymbolAt(syms []Symbol, pc uint32) (Symbol, bool) {
	var best Symbol
	found := false
	for _, s := range syms {
		if !s.Code || pc < s.Addr || pc-s.Addr >= s.Size {
			continue
		}
		if !found || s.Size < best.Size {
			best, found = s, true
		}
	}
	return best, found
}

// ProfileSymbol names a tile's profile buffer among its symbols: one
// little-endian 32-bit word per compute phase of the host program's
// Phases, in order, where the tile's supervisor stores its cycle counter
// (CSR cycles) at the end of that superstep, before its sync. A run
// rewrites the words of the phases it ran; ipu-check reads them back.
const ProfileSymbol = "__profile"
