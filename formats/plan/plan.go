// Package plan is the plan file: ipu-plan's output and ipu-link's input,
// and the resumable search state beside it (state.go).
//
// A plan is JSON, written by Marshal with a fixed field order (struct
// order, below), slices sorted, no maps, floats in strconv's shortest
// round-trip form, one trailing newline:
//
//	Plan {
//		format   "ipu-plan/1"
//		model    {path, fingerprint}     the .onnx it was made from (sha256 hex)
//		arch     preset name; tiles: tile count; seed: the search seed
//		graph    Graph: the model's graph, self-contained (values with
//		         dtype, shape and constant data in base64; nodes with op,
//		         value indices and attributes), so ipu-link needs no model
//		tensors  [Tensor]: per value, layout and pieces (tile, region)
//		steps    [Step]: per node, kernel, split, tile range, cast order,
//		         stationary operand
//		cost     {final_cycles, final_exchange, compute_bound, estimated}
//		search   {attempts, incumbent_cycles}
//	}
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
	"math"
)

// Format is the version string of the plan file.
const Format = "ipu-plan/1"

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
	Cost    Cost     `json:"cost"`
	Search  Search   `json:"search"`
}

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
}

// Attr is one parsed attribute: integers (booleans as 0 or 1, element
// types as ONNX numbers) or floats.
type Attr struct {
	Name   string    `json:"name"`
	Ints   []int64   `json:"ints,omitempty"`
	Floats []float64 `json:"floats,omitempty"`
}

// Layouts of a tensor's pieces.
const (
	RowMajor = "rowmajor"
	APanel   = "apanel"
	BPanel   = "bpanel"
)

// Tensor is where a value lives: pieces sorted by tile, then region. A
// region has one [lo, hi) range per dimension. A piece may appear on
// several tiles (replication). Addr is the piece's address on its tile,
// 0 until storage is placed.
type Tensor struct {
	Value  int     `json:"value"`
	Name   string  `json:"name"`
	DType  string  `json:"dtype"`
	Shape  []int64 `json:"shape"`
	Layout string  `json:"layout"`
	Pieces []Piece `json:"pieces"`
}

// Piece is one block of a tensor on one tile.
type Piece struct {
	Tile   int        `json:"tile"`
	Region [][2]int64 `json:"region"`
	Addr   uint32     `json:"addr"`
}

// Cast orders: where a cast feeding a matrix product runs.
const (
	BeforeExchange = "before_exchange"
	AfterExchange  = "after_exchange"
)

// Step is what one node becomes: a kernel over the contiguous tile range
// [Tiles[0], Tiles[1]). Steps are sorted by node.
type Step struct {
	Node       int    `json:"node"`
	Name       string `json:"name"`
	Kernel     string `json:"kernel"`
	CastOrder  string `json:"cast_order,omitempty"`
	Stationary string `json:"stationary,omitempty"` // "a" or "b"
	Split      Split  `json:"split"`
	Tiles      [2]int `json:"tiles"`
}

// Split is the block counts of a matrix product [M,K]x[K,N] (elementwise
// and row steps split M only).
type Split struct {
	M int `json:"m"`
	N int `json:"n"`
	K int `json:"k"`
}

// Cost is the plan's cycle figures. With Estimated, FinalCycles comes
// from the cost model; otherwise from the linker's lowering.
type Cost struct {
	FinalCycles   int64 `json:"final_cycles"`
	FinalExchange int64 `json:"final_exchange"`
	ComputeBound  int64 `json:"compute_bound"`
	Estimated     bool  `json:"estimated"`
}

// Search summarises the search that produced the plan.
type Search struct {
	Attempts        int   `json:"attempts"`
	IncumbentCycles int64 `json:"incumbent_cycles"`
}

// Limits of a plan a reader accepts.
const (
	MaxElements = 1 << 28 // elements of one value (graph.MaxElements)
	MaxTiles    = 1 << 16
	MaxRank     = 8
)

// dtypeSizes are the element types a plan may hold, with their raw sizes.
var dtypeSizes = map[string]int{
	"float": 4, "float16": 2, "int64": 8, "int32": 4,
	"float8e4m3fn": 1, "float8e4m3fnuz": 1, "float8e5m2": 1, "float8e5m2fnuz": 1,
}

// DTypeSize returns the raw element size of a dtype name, 0 if unknown.
func DTypeSize(name string) int { return dtypeSizes[name] }

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
	return marshal(p)
}

func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
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
	var head struct {
		Format *string `json:"format"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return errAt("", "bad JSON at byte %d: %v", se.Offset, se)
		}
		return errAt("format", "%v", err)
	}
	if head.Format == nil {
		return errAt("format", "missing (want %q)", want)
	}
	if *head.Format != want {
		return errAt("format", "unsupported format %q (want %q)", *head.Format, want)
	}
	return nil
}

// Read decodes and validates a plan file.
func Read(data []byte) (*Plan, error) {
	if err := checkFormat(data, Format); err != nil {
		return nil, err
	}
	var p Plan
	if err := decodeStrict(data, &p); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Validate checks every index and size of p.
func (p *Plan) Validate() error {
	if p.Format != Format {
		return errAt("format", "unsupported format %q (want %q)", p.Format, Format)
	}
	if p.Arch == "" {
		return errAt("arch", "empty")
	}
	if p.Tiles <= 0 || p.Tiles > MaxTiles {
		return errAt("tiles", "%d out of range [1, %d]", p.Tiles, MaxTiles)
	}
	if err := p.Graph.validate("graph"); err != nil {
		return err
	}
	nv := len(p.Graph.Values)
	for i, t := range p.Tensors {
		path := fmt.Sprintf("tensors[%d]", i)
		if t.Value < 0 || t.Value >= nv {
			return errAt(path+".value", "%d out of range [0, %d)", t.Value, nv)
		}
		if i > 0 && p.Tensors[i-1].Value >= t.Value {
			return errAt(path+".value", "%d not after %d (tensors are sorted by value, once each)", t.Value, p.Tensors[i-1].Value)
		}
		v := p.Graph.Values[t.Value]
		if t.Name != v.Name || t.DType != v.DType || !equalShape(t.Shape, v.Shape) {
			return errAt(path, "name, dtype or shape differ from graph.values[%d]", t.Value)
		}
		switch t.Layout {
		case RowMajor, APanel, BPanel:
		default:
			return errAt(path+".layout", "unknown layout %q", t.Layout)
		}
		for j, pc := range t.Pieces {
			pp := fmt.Sprintf("%s.pieces[%d]", path, j)
			if pc.Tile < 0 || pc.Tile >= p.Tiles {
				return errAt(pp+".tile", "%d out of range [0, %d)", pc.Tile, p.Tiles)
			}
			if len(pc.Region) != len(t.Shape) {
				return errAt(pp+".region", "%d ranges for a rank-%d tensor", len(pc.Region), len(t.Shape))
			}
			for k, r := range pc.Region {
				if r[0] < 0 || r[0] > r[1] || r[1] > t.Shape[k] {
					return errAt(fmt.Sprintf("%s.region[%d]", pp, k), "[%d, %d) outside [0, %d)", r[0], r[1], t.Shape[k])
				}
			}
			if j > 0 && !pieceLess(t.Pieces[j-1], pc) {
				return errAt(pp, "not sorted after pieces[%d] (by tile, then region)", j-1)
			}
		}
	}
	nn := len(p.Graph.Nodes)
	for i, s := range p.Steps {
		path := fmt.Sprintf("steps[%d]", i)
		if s.Node < 0 || s.Node >= nn {
			return errAt(path+".node", "%d out of range [0, %d)", s.Node, nn)
		}
		if i > 0 && p.Steps[i-1].Node >= s.Node {
			return errAt(path+".node", "%d not after %d (steps are sorted by node, once each)", s.Node, p.Steps[i-1].Node)
		}
		if s.Name != p.Graph.Nodes[s.Node].Name {
			return errAt(path+".name", "%q, graph.nodes[%d] is %q", s.Name, s.Node, p.Graph.Nodes[s.Node].Name)
		}
		if s.Kernel == "" {
			return errAt(path+".kernel", "empty")
		}
		switch s.CastOrder {
		case "", BeforeExchange, AfterExchange:
		default:
			return errAt(path+".cast_order", "unknown cast order %q", s.CastOrder)
		}
		switch s.Stationary {
		case "", "a", "b":
		default:
			return errAt(path+".stationary", "unknown operand %q (want a or b)", s.Stationary)
		}
		lo, hi := s.Tiles[0], s.Tiles[1]
		if lo < 0 || lo >= hi || hi > p.Tiles {
			return errAt(path+".tiles", "[%d, %d) is not a non-empty range of [0, %d)", lo, hi, p.Tiles)
		}
		if s.Split.M < 1 || s.Split.N < 1 || s.Split.K < 1 {
			return errAt(path+".split", "factors %d, %d, %d: want at least 1", s.Split.M, s.Split.N, s.Split.K)
		}
		if int64(s.Split.M)*int64(s.Split.N)*int64(s.Split.K) > int64(hi-lo) {
			return errAt(path+".split", "%d x %d x %d blocks exceed the %d tiles of the range", s.Split.M, s.Split.N, s.Split.K, hi-lo)
		}
	}
	if p.Cost.FinalCycles < 0 || p.Cost.FinalExchange < 0 || p.Cost.ComputeBound < 0 {
		return errAt("cost", "negative cycles")
	}
	if p.Search.Attempts < 0 {
		return errAt("search.attempts", "negative")
	}
	return nil
}

func (g *Graph) validate(path string) error {
	nv := len(g.Values)
	seen := make(map[string]bool, nv)
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
	idx := func(p string, i int, optional bool) error {
		if optional && i == -1 {
			return nil
		}
		if i < 0 || i >= nv {
			return errAt(p, "value %d out of range [0, %d)", i, nv)
		}
		return nil
	}
	for i, v := range g.Inputs {
		if err := idx(fmt.Sprintf("%s.inputs[%d]", path, i), v, false); err != nil {
			return err
		}
	}
	if len(g.Outputs) == 0 {
		return errAt(path+".outputs", "empty")
	}
	for i, v := range g.Outputs {
		if err := idx(fmt.Sprintf("%s.outputs[%d]", path, i), v, false); err != nil {
			return err
		}
	}
	produced := make([]int, nv) // node+1 that produces each value
	for i, n := range g.Nodes {
		np := fmt.Sprintf("%s.nodes[%d]", path, i)
		if n.Op == "" {
			return errAt(np+".op", "empty")
		}
		for k, v := range n.Inputs {
			if err := idx(fmt.Sprintf("%s.inputs[%d]", np, k), v, true); err != nil {
				return err
			}
		}
		if len(n.Outputs) == 0 {
			return errAt(np+".outputs", "empty")
		}
		for k, v := range n.Outputs {
			op := fmt.Sprintf("%s.outputs[%d]", np, k)
			if err := idx(op, v, k > 0); err != nil {
				return err
			}
			if v < 0 {
				continue
			}
			if produced[v] != 0 {
				return errAt(op, "value %d already produced by node %d", v, produced[v]-1)
			}
			if g.Values[v].Const != nil {
				return errAt(op, "value %d is a constant", v)
			}
			produced[v] = i + 1
		}
		for k, a := range n.Attrs {
			ap := fmt.Sprintf("%s.attrs[%d]", np, k)
			if a.Name == "" {
				return errAt(ap+".name", "empty")
			}
			if k > 0 && n.Attrs[k-1].Name >= a.Name {
				return errAt(ap+".name", "%q not after %q (attributes are sorted, once each)", a.Name, n.Attrs[k-1].Name)
			}
			for _, f := range a.Floats {
				if math.IsNaN(f) || math.IsInf(f, 0) {
					return errAt(ap+".floats", "not finite")
				}
			}
		}
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
