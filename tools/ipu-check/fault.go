package main

import (
	"fmt"
	"strings"

	"ipu.local/formats/ipuexe"
	"ipu.local/libs/device"
	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
	"ipu.local/libs/sim"
)

// explainFault adds to a device fault where it happened: the kernel
// whose code holds the faulting PC (the package's code symbols, named by
// the linker after the node a kernel computes) and, from the model
// section, that node, its output and what such a kernel faults on. A
// package read without its images (options.readsImages) gets them
// first, from the file if it still has the fingerprint the device runs:
// the session names symbols from the same package.
func explainFault(err error, f *sim.Fault, s *device.Session, pkg *ipuexe.Package, o *options, fingerprint string) error {
	if !o.readsImages() {
		full, fp, rerr := readPackage(o.pkgPath, true)
		if rerr != nil || fp != fingerprint {
			return err
		}
		pkg.Images = full.Images
	}
	sym, ok := s.CodeSymbol(f.Tile, f.PC)
	if !ok {
		return err
	}
	if sym.Name == "supervisor" {
		return fmt.Errorf("%w: in the supervisor code of tile %d", err, f.Tile)
	}
	if len(pkg.Host.Model) != 0 && (strings.HasPrefix(sym.Name, "rt_") || sym.Name == "host_commands") {
		// The linker's tile runtime (libs/link runtime.go).
		return fmt.Errorf("%w: in the runtime's %s of tile %d", err, sym.Name, f.Tile)
	}
	if len(pkg.Host.Model) == 0 {
		// An assembly program: its own symbols.
		return fmt.Errorf("%w: in code symbol %q", err, sym.Name)
	}
	msg := fmt.Sprintf("in kernel %q", sym.Name)
	if g, gerr := packageModel(pkg); gerr == nil {
		if n := kernelNode(g, sym.Name); n != nil {
			msg += nodeFault(n)
		}
	}
	return fmt.Errorf("%w: %s", err, msg)
}

// kernelNode returns the node a kernel symbol names: the node whose name
// is the symbol, or the longest one the symbol continues with a dot.
func kernelNode(g *graph.Graph, sym string) *graph.Node {
	var best *graph.Node
	for _, n := range g.Nodes {
		if n.Name != sym && !strings.HasPrefix(sym, n.Name+".") {
			continue
		}
		if best == nil || len(n.Name) > len(best.Name) {
			best = n
		}
	}
	return best
}

// nodeFault names node n, its output and what its kernels fault on.
func nodeFault(n *graph.Node) string {
	s := fmt.Sprintf(" of node %q (%s", n.Name, n.Op)
	if len(n.Outputs) > 0 && n.Outputs[0] != nil {
		s += fmt.Sprintf(", output %q", n.Outputs[0].Name)
	}
	s += ")"
	switch n.Op {
	case "Gather":
		if a, ok := n.Attrs.(*graph.Gather); ok && len(n.Inputs) == 2 && n.Inputs[0] != nil && n.Inputs[1] != nil && a.Axis < len(n.Inputs[0].Shape) {
			d := n.Inputs[0].Shape[a.Axis]
			s += fmt.Sprintf(": an index of %q outside [-%d, %d), the rows of %q", n.Inputs[1].Name, d, d, n.Inputs[0].Name)
		}
	case "Add", "Sub", "Mul":
		if t := n.Outputs[0].DType; t == onnx.Int32 || t == onnx.Int64 {
			s += ": a result outside the int32 range"
			if t == onnx.Int64 {
				s += " (the device holds int64 values as int32)"
			}
		}
	}
	return s
}
