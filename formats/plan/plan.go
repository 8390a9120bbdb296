// Package plan is the plan file: ipu-plan's output and ipu-link's input,
// and the resumable search state beside it (state.go).
//
// A plan is JSON, written by Marshal with a fixed field order (struct
// order, below), slices sorted, no maps, floats in strconv's shortest
// round-trip form, one trailing newline:
//
//	Plan {
//		format   "ipu-plan/2"
//		model    {path, fingerprint}     the .onnx it was made from (sha256 hex; with
//		                                 its external data, if any: onnx.FingerprintModel)
//		arch     preset name; tiles: tile count; seed: the search seed
//		graph    Graph: the model's graph, self-contained (values with
//		         dtype, shape and constant data in base64; nodes with op,
//		         value indices and attributes), so ipu-link needs no model
//		tensors  [Tensor]: every layout of every value the program holds:
//		         id, value, dtype, shape, layout (rowmajor, apanel,
//		         bpanel), pad, source (step, host, const) and pieces
//		         (tile, region)
//		steps    [Step]: the program in order: per node its kernel and
//		         the tensors it reads and writes; inserted re-layouts and
//		         packs; products with their split and tile range
//		cost     {final_cycles, final_exchange, compute_bound, estimated}
//		search   {attempts, incumbent_cycles}
//	}
//
// The plan is the contract between ipu-plan and ipu-link: the planner
// decides every tensor's mapping and every step, the linker only
// allocates, emits code and schedules exchanges, and refuses a plan
// whose layouts do not fit its steps.
//
// Read rejects another format by name and checks every index against
// what it points into; its errors name the JSON path at fault
// ("graph.nodes[3].inputs[1]: ...").
package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// Format is the version string of the plan file.
const Format = "ipu-plan/2"

// Plan is a compiled mapping of a model's graph onto the tiles.
type Plan struct {
	Format  string   `json:"format"`
	Model   Model    `json:"model"`
	Arch    string   `json:"arch"`
	Tiles   int      `json:"tiles"`
	Seed    uint64   `json:"seed"`
	Graph   Graph    `json:"graph"`
	Tensors []Tensor `json:"tensors"`
	Steps   []Step   `json:"steps"`
	// Supersteps is how the steps' supersteps are ordered: "" (each
	// step's after the previous step's) or Compact (libs/lower
	// compact.go: a step's work joins the earliest superstep its data
	// allows, so that independent steps share supersteps).
	Supersteps string `json:"supersteps,omitempty"`
	// Packs is how a pack step lowers a piece other tiles need too: ""
	// (packed into its own tile's operand block when it lies whole in
	// it, and sent from there) or StagedPacks (always into a staging
	// panel; its own block copied from there after the exchange: the
	// operand blocks live from the exchange on, not from the pack).
	Packs  string `json:"packs,omitempty"`
	Cost   Cost   `json:"cost"`
	Search Search `json:"search"`
	// Schedules are the exchange schedules ipu-plan's validation link
	// made, packed (PackSchedules; see schedules.go): ipu-link relocates
	// and validates them instead of scheduling again. Optional; a plan
	// edited so that its supersteps move other patterns links as well,
	// scheduling those.
	Schedules []byte `json:"exchange_schedules,omitempty"`
}

// Compact is Plan.Supersteps of a compacted program.
const Compact = "compact"

// StagedPacks is Plan.Packs of a plan whose packs all stage.
const StagedPacks = "staged"

// Model names the model a plan was made from. Path is as the user gave
// it (relative paths stay relative); Fingerprint is the hex SHA-256 of
// the .onnx bytes.
type Model struct {
	Path        string `json:"path"`
	Fingerprint string `json:"fingerprint"`
}

// Graph is the model's graph with values referred to by index.
type Graph struct {
	Name    string  `json:"name"`
	Opset   int64   `json:"opset"`
	Inputs  []int   `json:"inputs"`
	Outputs []int   `json:"outputs"`
	Values  []Value `json:"values"`
	Nodes   []Node  `json:"nodes"` // topological order
	// Downcast names the DOUBLE tensors of the model computed as float
	// (ipu-plan --downcast-fp64), sorted: their test data stays double.
	Downcast []string `json:"downcast,omitempty"`
}

// Value is a tensor of the graph. DType is the ONNX element type's name
// ("float", "float16", "float8e4m3fnuz", ...). Const holds a constant's
// raw little-endian elements (base64 in JSON); nil otherwise.
type Value struct {
	Name  string  `json:"name"`
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
	Const []byte  `json:"const,omitempty"`
}

// Node is an operator application. An omitted optional input or output
// is -1. Attrs are sorted by name.
type Node struct {
	Name    string `json:"name"`
	Op      string `json:"op"`
	Inputs  []int  `json:"inputs"`
	Outputs []int  `json:"outputs"`
	Attrs   []Attr `json:"attrs,omitempty"`
	// If and Side tag a node spliced out of an If the device branches on
	// (the If node's name; "then", "else", or "select" for the Where
	// taking an If output from the side that ran); both empty otherwise.
	// Plans written before branching have neither.
	If   string `json:"if,omitempty"`
	Side string `json:"side,omitempty"`
}

// Attr is one parsed attribute: integers (booleans as 0 or 1, element
// types as ONNX numbers) or floats.
type Attr struct {
	Name   string    `json:"name"`
	Ints   []int64   `json:"ints,omitempty"`
	Floats []float64 `json:"floats,omitempty"`
}

// Layouts of a tensor's pieces (see libs/layout for the storage each
// names).
const (
	RowMajor = "rowmajor"
	APanel   = "apanel"
	BPanel   = "bpanel"
)

// Sources of a tensor's data.
const (
	FromStep  = "step"  // a step of the plan writes it
	FromHost  = "host"  // the host delivers it (a graph input, through views)
	FromConst = "const" // it is in the tile images (a constant, through views)
)

// Tensor is one layout of one value: where its elements live. A value
// may have several tensors (the layouts its readers need); Steps name
// tensors by ID. Pieces are sorted by tile, then region; a region has
// one [lo, hi) range per axis; the distinct regions partition the value
// and a region may be held by several tiles (replication). DType is the
// element type stored (the value's). Transposed: the tensor holds the
// value with its last two axes swapped (a matrix product's transposed
// operand); Shape and regions are then in those coordinates. Pad: a
// row-major tensor's rows are padded to a multiple of Pad elements.
type Tensor struct {
	ID         int     `json:"id"`
	Value      int     `json:"value"`
	Name       string  `json:"name"`
	DType      string  `json:"dtype"`
	Shape      []int64 `json:"shape"`
	Transposed bool    `json:"transposed,omitempty"`
	Layout     string  `json:"layout"`
	Pad        int     `json:"pad,omitempty"`
	Source     string  `json:"source"`
	Pieces     []Piece `json:"pieces"`
}

// Piece is one block of a tensor on one tile.
type Piece struct {
	Tile   int        `json:"tile"`
	Region [][2]int64 `json:"region"`
}

// Cast orders: where a cast feeding a matrix product runs.
const (
	BeforeExchange = "before_exchange"
	AfterExchange  = "after_exchange"
)

// Step is one thing the program does, in program order: a node's kernel
// (Node its index), or an inserted step (Node -1: a re-layout, a pack
// into a product's panels). Inputs and Outputs are tensor IDs in the
// node's input and output order (-1: an omitted optional operand, or an
// operand the kernel takes as an immediate). A node folded into another
// step (a cast or transpose a product's pack absorbs) has a step with
// kernel "folded" and no tensors. Products carry their split over the
// tile range [Tiles[0], Tiles[1]); every node has exactly one step.
type Step struct {
	Node       int    `json:"node"`
	Name       string `json:"name"`
	Kernel     string `json:"kernel"`
	Inputs     []int  `json:"inputs"`
	Outputs    []int  `json:"outputs"`
	CastOrder  string `json:"cast_order,omitempty"`
	Stationary string `json:"stationary,omitempty"` // "a" or "b": the operand cast after the exchange; none: both before it (cast order before_exchange)
	Split      *Split `json:"split,omitempty"`
	Tiles      [2]int `json:"tiles"`
}

// Cost is the plan's cycle figures. With Estimated, FinalCycles comes
// from the cost model; otherwise from the linker's lowering.
type Cost struct {
	FinalCycles   int64 `json:"final_cycles"`
	FinalExchange int64 `json:"final_exchange"`
	ComputeBound  int64 `json:"compute_bound"`
	Estimated     bool  `json:"estimated"`
	// HostLinkCycles is the host link's cycles for the fetch's and the
	// result's bytes (outside final_cycles; absent from older plans).
	HostLinkCycles int64 `json:"host_link_cycles,omitempty"`
}

// Search summarises the search that produced the plan.
type Search struct {
	Attempts        int   `json:"attempts"`
	IncumbentCycles int64 `json:"incumbent_cycles"`
	// Objective is what the search minimised (absent from older plans).
	Objective string `json:"objective,omitempty"`
}

// Search objectives: what a search minimises.
const (
	// ObjectiveInference is an inference's cycles end to end: the
	// device's final_cycles plus the host link's cycles for the fetch and
	// the result (the default).
	ObjectiveInference = "inference"
	// ObjectiveDevice is final_cycles alone, as if the inputs were on the
	// device already and the host's copies cost nothing.
	ObjectiveDevice = "device"
)

// CheckObjective checks a search objective's name ("" is the default,
// ObjectiveInference).
func CheckObjective(o string) error {
	switch o {
	case "", ObjectiveInference, ObjectiveDevice:
		return nil
	}
	return fmt.Errorf("unknown objective %q (want %q or %q)", o, ObjectiveInference, ObjectiveDevice)
}

// ObjectiveOf is o, or the default for "".
func ObjectiveOf(o string) string {
	if o == "" {
		return ObjectiveInference
	}
	return o
}

// Limits of a plan a reader accepts.
const (
	MaxElements = 1 << 28 // elements of one value (graph.MaxElements)
	MaxTiles    = 1 << 16
	MaxRank     = 8
)

// dtypeSizes are the element types a plan may hold, with their raw sizes.
var dtypeSizes = map[string]int{
	"float": 4, "float16": 2, "int64": 8, "int32": 4, "bool": 1,
	"float8e4m3fn": 1, "float8e4m3fnuz": 1, "float8e5m2": 1, "float8e5m2fnuz": 1,
}

// DTypeSize returns the raw element size of a dtype name, 0 if unknown.
func DTypeSize(name string) int { return dtypeSizes[name] }

// DeviceDTypeSize returns the element size of a dtype name on the device
// and in host pages, 0 if unknown: the raw size, except "bool", which
// the device holds as an FP32 word, 0.0 (false) or 1.0 (true), so that
// comparisons, logic and selection are FP32 kernels, and "int64", held
// as int32 (the device computes indices in 32 bits). The host converts
// (obj.Tensor.Scatter and Gather): a raw byte b becomes 1.0 when b != 0,
// a word becomes the byte 1 when it is not 0; an int64 is narrowed,
// refusing a value outside the int32 range, and widened back.
func DeviceDTypeSize(name string) int {
	switch name {
	case "bool", "int64":
		return 4
	}
	return dtypeSizes[name]
}

// Error is a plan or state that does not validate: Kind is "plan" or
// "search state", Path the JSON path at fault.
type Error struct {
	Kind string
	Path string
	Msg  string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Kind + ": " + e.Msg
	}
	return e.Kind + ": " + e.Path + ": " + e.Msg
}

func errAt(path string, format string, args ...any) error {
	return &Error{Kind: "plan", Path: path, Msg: fmt.Sprintf(format, args...)}
}

// Marshal encodes p canonically (indented JSON, trailing newline).
func Marshal(p *Plan) ([]byte, error) {
	q := *p
	var consts [][]byte
	q.Graph.Values, consts = stubValues(p.Graph.Values)
	fs := constFillings(consts, `"const": "`)
	if len(p.Schedules) > 0 {
		q.Schedules = stubBytes
		fs = append(fs, filling{`"exchange_schedules": "`, p.Schedules})
	}
	doc, err := marshal(&q)
	if err != nil {
		return nil, err
	}
	return fill(doc, fs)
}

func marshal(v any) ([]byte, error) {
	var w indentWriter
	enc := json.NewEncoder(&w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return w.out, nil
}

// indentWriter indents the one compact document a json.Encoder writes
// (ending with its newline) straight from the encoder's buffer: a copy
// of the document first was a second allocation of a plan's size (the
// 12-layer encoder's is 294 MB).
type indentWriter struct {
	out   []byte
	wrote bool
}

func (w *indentWriter) Write(p []byte) (int, error) {
	if w.wrote {
		return 0, errors.New("plan: the JSON encoder wrote twice")
	}
	w.wrote = true
	w.out = indent(make([]byte, 0, len(p)+len(p)/2), p)
	return len(p), nil
}

// Fingerprint is the hex SHA-256 of a plan file's bytes.
func Fingerprint(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// decodeStrict decodes one JSON document into v, rejecting unknown
// fields and trailing data, with errors naming the JSON path.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return errAt(te.Field, "%s where %v expected (byte %d)", te.Value, te.Type, te.Offset)
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return errAt("", "bad JSON at byte %d: %v", se.Offset, se)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return errAt("", "bad JSON at byte %d: unexpected end of JSON input", len(data))
		}
		return errAt("", "%v", err)
	}
	if dec.More() {
		return errAt("", "data after the JSON document at byte %d", dec.InputOffset())
	}
	return nil
}

// checkFormat reads the "format" field alone, so that another version is
// refused by name before its fields are interpreted.
func checkFormat(data []byte, want string) error {
	format, err := readFormat(data)
	if err != nil {
		return err
	}
	if format == nil {
		return errAt("format", "missing (want %q)", want)
	}
	if *format != want {
		return errAt("format", "unsupported format %q (want %q)", *format, want)
	}
	return nil
}

// readFormat returns the top-level "format" string, reading tokens only
// up to it (the writers put it first), or nil when the object has none.
// The rest of the document is checked by the full decode that follows.
func readFormat(data []byte) (*string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	bad := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return errAt("", "bad JSON at byte %d: %v", se.Offset, se)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return errAt("", "bad JSON at byte %d: unexpected end of JSON input", len(data))
		}
		return errAt("format", "%v", err)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, bad(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errAt("", "bad JSON at byte %d: want an object", dec.InputOffset())
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad(err)
		}
		if key, _ := tok.(string); key == "format" {
			var f string
			if err := dec.Decode(&f); err != nil {
				return nil, bad(err)
			}
			return &f, nil
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, bad(err)
		}
	}
	return nil, nil
}

// Read decodes and validates a plan file.
func Read(data []byte) (*Plan, error) {
	p, _, err := ReadWithSchedules(data)
	return p, err
}

// ReadWithSchedules is Read that also returns the plan's exchange
// schedules unpacked (UnpackSchedules), which reading validates anyway:
// for a linker, which would otherwise unpack them a second time.
func ReadWithSchedules(data []byte) (*Plan, []Exchange, error) {
	if err := checkFormat(data, Format); err != nil {
		return nil, nil, err
	}
	p, ok := decodeFast(data, func(p *Plan) []Value { return p.Graph.Values })
	if !ok {
		p = new(Plan)
		if err := decodeStrict(data, p); err != nil {
			return nil, nil, err
		}
	}
	xs, err := p.validate()
	if err != nil {
		return nil, nil, err
	}
	return p, xs, nil
}

// Validate checks every index and size of p.
func (p *Plan) Validate() error {
	_, err := p.validate()
	return err
}

// validate is Validate returning the unpacked schedules.
func (p *Plan) validate() ([]Exchange, error) {
	if p.Format != Format {
		return nil, errAt("format", "unsupported format %q (want %q)", p.Format, Format)
	}
	if p.Arch == "" {
		return nil, errAt("arch", "empty")
	}
	if p.Tiles <= 0 || p.Tiles > MaxTiles {
		return nil, errAt("tiles", "%d out of range [1, %d]", p.Tiles, MaxTiles)
	}
	if err := p.Graph.validate("graph"); err != nil {
		return nil, err
	}
	if err := p.validateTensors(); err != nil {
		return nil, err
	}
	if err := p.validateSteps(); err != nil {
		return nil, err
	}
	if p.Supersteps != "" && p.Supersteps != Compact {
		return nil, errAt("supersteps", "unknown order %q (want %q or none)", p.Supersteps, Compact)
	}
	if p.Packs != "" && p.Packs != StagedPacks {
		return nil, errAt("packs", "unknown packing %q (want %q or none)", p.Packs, StagedPacks)
	}
	if p.Cost.FinalCycles < 0 || p.Cost.FinalExchange < 0 || p.Cost.ComputeBound < 0 || p.Cost.HostLinkCycles < 0 {
		return nil, errAt("cost", "negative cycles")
	}
	if p.Search.Attempts < 0 {
		return nil, errAt("search.attempts", "negative")
	}
	if err := CheckObjective(p.Search.Objective); err != nil {
		return nil, errAt("search.objective", "%v", err)
	}
	return UnpackSchedules(p.Schedules)
}

func (g *Graph) validate(path string) error {
	if err := g.validateValues(path); err != nil {
		return err
	}
	nv := len(g.Values)
	for i, v := range g.Inputs {
		if err := valueIndex(fmt.Sprintf("%s.inputs[%d]", path, i), v, nv, false); err != nil {
			return err
		}
	}
	if len(g.Outputs) == 0 {
		return errAt(path+".outputs", "empty")
	}
	for i, v := range g.Outputs {
		if err := valueIndex(fmt.Sprintf("%s.outputs[%d]", path, i), v, nv, false); err != nil {
			return err
		}
	}
	produced, err := g.validateNodes(path)
	if err != nil {
		return err
	}
	// Every node input must be defined before use: a graph input, a
	// constant, or an earlier node's output.
	isInput := make([]bool, nv)
	for _, v := range g.Inputs {
		isInput[v] = true
	}
	for i, n := range g.Nodes {
		for k, v := range n.Inputs {
			if v < 0 || isInput[v] || g.Values[v].Const != nil {
				continue
			}
			if produced[v] == 0 || produced[v]-1 >= i {
				return errAt(fmt.Sprintf("%s.nodes[%d].inputs[%d]", path, i, k), "value %d (%q) is not defined before the node", v, g.Values[v].Name)
			}
		}
	}
	return nil
}

// validateValues checks the graph's values: names once each, element
// types, shapes within the limits, constants of their shape's bytes.
func (g *Graph) validateValues(path string) error {
	seen := make(map[string]bool, len(g.Values))
	for i, v := range g.Values {
		vp := fmt.Sprintf("%s.values[%d]", path, i)
		if v.Name == "" {
			return errAt(vp+".name", "empty")
		}
		if seen[v.Name] {
			return errAt(vp+".name", "%q defined twice", v.Name)
		}
		seen[v.Name] = true
		size := DTypeSize(v.DType)
		if size == 0 {
			return errAt(vp+".dtype", "unknown element type %q", v.DType)
		}
		if len(v.Shape) > MaxRank {
			return errAt(vp+".shape", "rank %d exceeds %d", len(v.Shape), MaxRank)
		}
		n := int64(1)
		for k, d := range v.Shape {
			if d < 0 || d > MaxElements {
				return errAt(fmt.Sprintf("%s.shape[%d]", vp, k), "dimension %d out of range [0, %d]", d, MaxElements)
			}
			n *= d
			if n > MaxElements {
				return errAt(vp+".shape", "more than %d elements", MaxElements)
			}
		}
		if v.Const != nil && int64(len(v.Const)) != n*int64(size) {
			return errAt(vp+".const", "%d bytes, want %d (%d elements of %d bytes)", len(v.Const), n*int64(size), n, size)
		}
	}
	return nil
}

// valueIndex checks value index i at path p against nv values (-1 allowed
// when optional).
func valueIndex(p string, i, nv int, optional bool) error {
	if optional && i == -1 {
		return nil
	}
	if i < 0 || i >= nv {
		return errAt(p, "value %d out of range [0, %d)", i, nv)
	}
	return nil
}

// validateNodes checks the graph's nodes: their operators, value indices
// (each value produced once, never a constant) and attributes (sorted,
// once each, floats finite). It returns, by value, the node that
// produces it plus one (0: none).
func (g *Graph) validateNodes(path string) ([]int, error) {
	nv := len(g.Values)
	produced := make([]int, nv)
	for i, n := range g.Nodes {
		np := fmt.Sprintf("%s.nodes[%d]", path, i)
		if n.Op == "" {
			return nil, errAt(np+".op", "empty")
		}
		for k, v := range n.Inputs {
			if err := valueIndex(fmt.Sprintf("%s.inputs[%d]", np, k), v, nv, true); err != nil {
				return nil, err
			}
		}
		if len(n.Outputs) == 0 {
			return nil, errAt(np+".outputs", "empty")
		}
		for k, v := range n.Outputs {
			op := fmt.Sprintf("%s.outputs[%d]", np, k)
			if err := valueIndex(op, v, nv, k > 0); err != nil {
				return nil, err
			}
			if v < 0 {
				continue
			}
			if produced[v] != 0 {
				return nil, errAt(op, "value %d already produced by node %d", v, produced[v]-1)
			}
			if g.Values[v].Const != nil {
				return nil, errAt(op, "value %d is a constant", v)
			}
			produced[v] = i + 1
		}
		for k, a := range n.Attrs {
			ap := fmt.Sprintf("%s.attrs[%d]", np, k)
			if a.Name == "" {
				return nil, errAt(ap+".name", "empty")
			}
			if k > 0 && n.Attrs[k-1].Name >= a.Name {
				return nil, errAt(ap+".name", "%q not after %q (attributes are sorted, once each)", a.Name, n.Attrs[k-1].Name)
			}
			for _, f := range a.Floats {
				if math.IsNaN(f) || math.IsInf(f, 0) {
					return nil, errAt(ap+".floats", "not finite")
				}
			}
		}
	}
	return produced, nil
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// pieceLess orders pieces by tile, then region (lexicographic on lo, hi).
func pieceLess(a, b Piece) bool {
	if a.Tile != b.Tile {
		return a.Tile < b.Tile
	}
	for k := 0; k < len(a.Region) && k < len(b.Region); k++ {
		if a.Region[k][0] != b.Region[k][0] {
			return a.Region[k][0] < b.Region[k][0]
		}
		if a.Region[k][1] != b.Region[k][1] {
			return a.Region[k][1] < b.Region[k][1]
		}
	}
	return len(a.Region) < len(b.Region)
}

// PieceLess is the order of Tensor.Pieces.
func PieceLess(a, b Piece) bool { return pieceLess(a, b) }
