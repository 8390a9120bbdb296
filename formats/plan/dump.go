package plan

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Dump writes p as canonical text for diffs: one line per value, node,
// tensor piece group and step. Constant data is summarised by its size
// and fingerprint.
func Dump(w io.Writer, p *Plan) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "format %s\n", p.Format)
	fmt.Fprintf(b, "model %q fingerprint %s\n", p.Model.Path, p.Model.Fingerprint)
	fmt.Fprintf(b, "arch %s tiles %d seed %d\n", p.Arch, p.Tiles, p.Seed)
	if p.Supersteps != "" {
		fmt.Fprintf(b, "supersteps %s\n", p.Supersteps)
	}
	g := &p.Graph
	fmt.Fprintf(b, "graph %q opset %d inputs %s outputs %s\n", g.Name, g.Opset, ints(g.Inputs), ints(g.Outputs))
	for i, v := range g.Values {
		fmt.Fprintf(b, "  value %d %q %s%s", i, v.Name, v.DType, shape(v.Shape))
		if v.Const != nil {
			fmt.Fprintf(b, " const %d bytes sha256 %s", len(v.Const), Fingerprint(v.Const)[:16])
		}
		b.WriteByte('\n')
	}
	for i, n := range g.Nodes {
		fmt.Fprintf(b, "  node %d %q %s %s -> %s", i, n.Name, n.Op, ints(n.Inputs), ints(n.Outputs))
		for _, a := range n.Attrs {
			fmt.Fprintf(b, " %s=", a.Name)
			if a.Floats != nil {
				fs := make([]string, len(a.Floats))
				for k, f := range a.Floats {
					fs[k] = strconv.FormatFloat(f, 'g', -1, 64)
				}
				fmt.Fprintf(b, "[%s]", strings.Join(fs, ","))
			} else {
				b.WriteString(ints64(a.Ints))
			}
		}
		b.WriteByte('\n')
	}
	for _, t := range p.Tensors {
		fmt.Fprintf(b, "tensor %d value %d %q %s%s %s", t.ID, t.Value, t.Name, t.DType, shape(t.Shape), t.Layout)
		if t.Transposed {
			b.WriteString(" transposed")
		}
		if t.Pad > 0 {
			fmt.Fprintf(b, " pad %d", t.Pad)
		}
		fmt.Fprintf(b, " source %s pieces %d\n", t.Source, len(t.Pieces))
		for _, pc := range t.Pieces {
			rs := make([]string, len(pc.Region))
			for k, r := range pc.Region {
				rs[k] = fmt.Sprintf("%d:%d", r[0], r[1])
			}
			fmt.Fprintf(b, "  tile %d [%s]\n", pc.Tile, strings.Join(rs, ","))
		}
	}
	for i, s := range p.Steps {
		fmt.Fprintf(b, "step %d node %d %q kernel %s in %s out %s", i, s.Node, s.Name, s.Kernel, ints(s.Inputs), ints(s.Outputs))
		if s.Split != nil {
			fmt.Fprintf(b, " split b=%d m=%d n=%d k=%d", s.Split.B, s.Split.M, s.Split.N, s.Split.K)
			if r := s.Split.Rest; r != nil {
				fmt.Fprintf(b, " rest %s>=%d m=%d n=%d", r.Axis, r.At, r.M, r.N)
			}
			fmt.Fprintf(b, " tiles [%d,%d)", s.Tiles[0], s.Tiles[1])
		}
		if s.CastOrder != "" {
			fmt.Fprintf(b, " cast_order=%s", s.CastOrder)
		}
		if s.Stationary != "" {
			fmt.Fprintf(b, " stationary=%s", s.Stationary)
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(b, "cost final_cycles=%d final_exchange=%d compute_bound=%d estimated=%t", p.Cost.FinalCycles, p.Cost.FinalExchange, p.Cost.ComputeBound, p.Cost.Estimated)
	if p.Cost.HostLinkCycles > 0 {
		fmt.Fprintf(b, " host_link_cycles=%d", p.Cost.HostLinkCycles)
	}
	fmt.Fprintf(b, "\nsearch attempts=%d incumbent_cycles=%d", p.Search.Attempts, p.Search.IncumbentCycles)
	if p.Search.Objective != "" {
		fmt.Fprintf(b, " objective=%s", p.Search.Objective)
	}
	b.WriteByte('\n')
	return b.Flush()
}

func ints(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return "[" + strings.Join(s, ",") + "]"
}

func ints64(v []int64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatInt(x, 10)
	}
	return "[" + strings.Join(s, ",") + "]"
}

func shape(v []int64) string { return ints64(v) }
