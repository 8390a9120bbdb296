package lower

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"ipu.local/formats/obj"
	"ipu.local/libs/prog"
)

// A compaction test program: kernels and transfers over a few buffers on
// every tile, run by an interpreter that gives every write a value made
// from the values read (a kernel: its reads in order, then its id; a
// transfer: a copy, every transfer of an exchange reading before any
// writes). Compaction must leave every cell's final value, and every
// value any kernel reads, as they were.

const (
	ctTiles = 4
	ctBufs  = 5
)

type ctProgram struct {
	p     *prog.Program
	parts map[*prog.Superstep][]partMark
	id    map[*prog.Kernel]uint64
}

// randomProgram makes a program of n compute and exchange supersteps
// (valid: no exchange reads a cell another of its transfers writes, nor
// writes one twice), with random step parts.
func randomProgram(rng *rand.Rand, n int) *ctProgram {
	p := &prog.Program{}
	tiles := []int{0, 1, 2, 3}
	bufs := make([]*prog.Buffer, ctBufs)
	for i := range bufs {
		bufs[i] = p.NewBuffer(fmt.Sprintf("b%d", i), tiles, 8, 16, prog.Interleaved)
	}
	ct := &ctProgram{p: p, parts: map[*prog.Superstep][]partMark{}, id: map[*prog.Kernel]uint64{}}
	p.Steps = append(p.Steps, prog.NewSuperstep(obj.HostExchange, "fetch"))
	var field uint32
	for i := range n {
		if rng.IntN(2) == 0 {
			s := prog.NewSuperstep(obj.Compute, fmt.Sprintf("compute:%d", i))
			for t := range ctTiles {
				for range rng.IntN(4) {
					k := &prog.Kernel{What: fmt.Sprintf("k%d", len(ct.id))}
					for range 1 + rng.IntN(2) {
						k.Fixes = append(k.Fixes, prog.Fix{Field: &field, Ref: prog.Ref{Buf: bufs[rng.IntN(ctBufs)]}})
					}
					k.Fixes = append(k.Fixes, prog.Fix{Field: &field, Ref: prog.Ref{Buf: bufs[rng.IntN(ctBufs)]}, Write: true})
					ct.id[k] = uint64(len(ct.id) + 1)
					s.Work[t] = append(s.Work[t], k)
				}
			}
			// Parts: boundaries at random kernel counts, increasing.
			for range rng.IntN(3) {
				m := map[int]int{}
				for t, ks := range s.Work {
					m[t] = rng.IntN(len(ks) + 1)
				}
				ct.parts[s] = append(ct.parts[s], partMark{m, fmt.Sprintf("step%d", len(ct.parts[s]))})
			}
			for j := 1; j < len(ct.parts[s]); j++ {
				for t := range ct.parts[s][j].at {
					ct.parts[s][j].at[t] = max(ct.parts[s][j].at[t], ct.parts[s][j-1].at[t])
				}
			}
			p.Steps = append(p.Steps, s)
			continue
		}
		s := prog.NewSuperstep(obj.Exchange, fmt.Sprintf("exchange:%d", i))
		written := map[[2]int]bool{}
		read := map[[2]int]bool{}
		for range 1 + rng.IntN(4) {
			src, from, to := rng.IntN(ctTiles), rng.IntN(ctBufs), rng.IntN(ctBufs)
			dst := (src + 1 + rng.IntN(ctTiles-1)) % ctTiles
			if written[[2]int{src, from}] || written[[2]int{dst, to}] || read[[2]int{dst, to}] {
				continue
			}
			read[[2]int{src, from}], written[[2]int{dst, to}] = true, true
			s.Xfers = append(s.Xfers, prog.Transfer{Src: src, Dst: dst, DstN: 1, Words: 1,
				From: prog.Ref{Buf: bufs[from]}, To: prog.Ref{Buf: bufs[to]}})
		}
		p.Steps = append(p.Steps, s)
	}
	p.Steps = append(p.Steps, prog.NewSuperstep(obj.HostExchange, "result"))
	return ct
}

// run interprets the program: the final cells, and each kernel's value
// (what it read).
func (ct *ctProgram) run() (cells map[[2]int]uint64, seen map[uint64]uint64) {
	cells, seen = map[[2]int]uint64{}, map[uint64]uint64{}
	for t := range ctTiles {
		for b := range ctBufs {
			cells[[2]int{t, b}] = uint64(1000*t + b)
		}
	}
	for _, s := range ct.p.Steps {
		switch s.Kind {
		case obj.Compute:
			for t, ks := range s.Work {
				for _, k := range ks {
					h := ct.id[k]
					for _, f := range k.Fixes {
						if !f.Write {
							h = h*1_000_003 + cells[[2]int{t, f.Ref.Buf.ID}]
						}
					}
					seen[ct.id[k]] = h
					for _, f := range k.Fixes {
						if f.Write {
							cells[[2]int{t, f.Ref.Buf.ID}] = h
						}
					}
				}
			}
		case obj.Exchange:
			vals := make([]uint64, len(s.Xfers))
			for i, x := range s.Xfers {
				vals[i] = cells[[2]int{x.Src, x.From.Buf.ID}]
			}
			for i, x := range s.Xfers {
				cells[[2]int{x.Dst, x.To.Buf.ID}] = vals[i]
			}
		}
	}
	return cells, seen
}

// TestCompactKeepsMeaning compacts random programs and checks that every
// kernel runs once, reading what it read before, and that the cells end
// as they did; compaction must also have merged some supersteps.
func TestCompactKeepsMeaning(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	fewer := 0
	for i := range 500 {
		ct := randomProgram(rng, 4+rng.IntN(10))
		wantCells, wantSeen := ct.run()
		n := len(ct.p.Steps)
		compact(ct.p, ct.parts, nil, nil, nil)
		gotCells, gotSeen := ct.run()
		if len(gotSeen) != len(wantSeen) {
			t.Fatalf("program %d: %d kernels ran, want %d", i, len(gotSeen), len(wantSeen))
		}
		for k, v := range wantSeen {
			if gotSeen[k] != v {
				t.Fatalf("program %d: kernel %d read other values after compaction", i, k)
			}
		}
		for c, v := range wantCells {
			if gotCells[c] != v {
				t.Fatalf("program %d: tile %d buffer %d ends %d, want %d", i, c[0], c[1], gotCells[c], v)
			}
		}
		kinds := []obj.PhaseKind{}
		for _, s := range ct.p.Steps {
			kinds = append(kinds, s.Kind)
		}
		if kinds[0] != obj.HostExchange || kinds[len(kinds)-1] != obj.HostExchange || slices.Contains(kinds[1:len(kinds)-1], obj.HostExchange) {
			t.Fatalf("program %d: host supersteps moved: %v", i, kinds)
		}
		if len(ct.p.Steps) < n {
			fewer++
		}
	}
	if fewer == 0 {
		t.Fatal("no program got fewer supersteps")
	}
	t.Logf("%d of 500 programs got fewer supersteps", fewer)
}

// TestPartsName: a merged compute superstep lists each step once.
func TestPartsName(t *testing.T) {
	for _, c := range []struct {
		names []string
		want  string
	}{
		{[]string{"a", "b", "a"}, "compute:a+b"},
		{[]string{"compute:a", "a", "reduce-add:b"}, "compute:a+reduce-add:b"},
		{[]string{"reduce-add:a", "compute:b", "b"}, "reduce-add:a+b"},
	} {
		if got := partsName(c.names); got != c.want {
			t.Errorf("partsName(%q) = %q, want %q", c.names, got, c.want)
		}
	}
}

// TestCompactIndependentSteps: a step that does not read what the step
// before it computes joins that step's first compute superstep, and the
// two reduce exchanges merge; a step that reads it stays after.
func TestCompactIndependentSteps(t *testing.T) {
	p := &prog.Program{}
	all := []int{0, 1}
	buf := func(name string) *prog.Buffer { return p.NewBuffer(name, all, 8, 16, prog.Interleaved) }
	x, pa, ra, pb, rb := buf("x"), buf("a.partials"), buf("a.recv"), buf("b.partials"), buf("b.recv")
	var field uint32
	kern := func(what string, reads []*prog.Buffer, writes *prog.Buffer) *prog.Kernel {
		k := &prog.Kernel{What: what}
		for _, b := range reads {
			k.Fixes = append(k.Fixes, prog.Fix{Field: &field, Ref: prog.Ref{Buf: b}})
		}
		k.Fixes = append(k.Fixes, prog.Fix{Field: &field, Ref: prog.Ref{Buf: writes}, Write: true})
		return k
	}
	c1 := prog.NewSuperstep(obj.Compute, "compute:a")
	c1.Work[0] = []*prog.Kernel{kern("a", []*prog.Buffer{x}, pa)}
	x2 := prog.NewSuperstep(obj.Exchange, "reduce:a")
	x2.Xfers = []prog.Transfer{{Src: 0, Dst: 1, DstN: 1, Words: 1, From: prog.Ref{Buf: pa}, To: prog.Ref{Buf: ra}}}
	c3 := prog.NewSuperstep(obj.Compute, "reduce-add:a+b")
	sum := kern("a.reduce-add", []*prog.Buffer{ra}, ra)
	kb := kern("b", []*prog.Buffer{x}, pb)
	c3.Work[1] = []*prog.Kernel{sum, kb}
	x4 := prog.NewSuperstep(obj.Exchange, "reduce:b")
	x4.Xfers = []prog.Transfer{{Src: 1, Dst: 0, DstN: 1, Words: 1, From: prog.Ref{Buf: pb}, To: prog.Ref{Buf: rb}}}
	c5 := prog.NewSuperstep(obj.Compute, "reduce-add:b")
	c5.Work[0] = []*prog.Kernel{kern("b.reduce-add", []*prog.Buffer{rb}, rb)}
	fetch, result := prog.NewSuperstep(obj.HostExchange, "fetch"), prog.NewSuperstep(obj.HostExchange, "result")
	p.Steps = []*prog.Superstep{fetch, c1, x2, c3, x4, c5, result}
	parts := map[*prog.Superstep][]partMark{c3: {{map[int]int{1: 1}, "b"}}}
	compact(p, parts, nil, nil, nil)
	var names []string
	for _, s := range p.Steps {
		names = append(names, s.Name)
	}
	want := []string{"fetch", "compute:a+b", "reduce:a+b", "reduce-add:a+reduce-add:b", "result"}
	if !slices.Equal(names, want) {
		t.Fatalf("supersteps %q, want %q", names, want)
	}
	if got := p.Steps[1].Work[1]; len(got) != 1 || got[0] != kb {
		t.Errorf("tile 1 of the first superstep runs %v, want b's kernel", got)
	}
	if got := p.Steps[3].Work[1]; len(got) != 1 || got[0] != sum {
		t.Errorf("tile 1 of the last compute superstep runs %v, want a's sum", got)
	}
}

// snapshot copies the program's supersteps (their kernel lists, not the
// kernels) and its parts, so that one program can be compacted again.
func (ct *ctProgram) snapshot() (*prog.Program, map[*prog.Superstep][]partMark, map[*prog.Superstep]*prog.Superstep) {
	p := &prog.Program{Buffers: ct.p.Buffers}
	parts := map[*prog.Superstep][]partMark{}
	orig := map[*prog.Superstep]*prog.Superstep{}
	for _, s := range ct.p.Steps {
		c := copyStep(s)
		p.Steps = append(p.Steps, c)
		orig[c] = s
		if ms, ok := ct.parts[s]; ok {
			parts[c] = ms
		}
	}
	return p, parts, orig
}

// shape is a compacted program's supersteps: names and kernel ids by
// tile.
func (ct *ctProgram) shape(p *prog.Program) string {
	var b strings.Builder
	for _, s := range p.Steps {
		fmt.Fprintf(&b, "%s:", s.Name)
		for t := range ctTiles {
			for _, k := range s.Work[t] {
				fmt.Fprintf(&b, " %d.%d", t, ct.id[k])
			}
		}
		fmt.Fprintf(&b, " x%d;", len(s.Xfers))
	}
	return b.String()
}

// TestCompactPartSums: compaction with parts' accesses recorded
// (partSum) gives the program it gives without them, both when it finds
// the accesses and when it reads them back; it reads a sum only when its
// kernel count is the part's (a sum of the right count that claims no
// accesses lets its part move to the first superstep in some programs).
func TestCompactPartSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 11))
	moved := 0
	for i := range 300 {
		ct := randomProgram(rng, 4+rng.IntN(10))
		p, parts, _ := ct.snapshot()
		compact(p, parts, nil, nil, nil)
		want := ct.shape(p)
		// Every part a sum of its kernel count.
		sums := partSums{}
		poisoned, wrong := partSums{}, partSums{}
		p0, parts0, orig := ct.snapshot()
		for _, s := range p0.Steps {
			if s.Kind != obj.Compute {
				continue
			}
			marks := parts0[s]
			for j := 0; j <= len(marks); j++ {
				n := 0
				for tl, ks := range s.Work {
					lo, hi := 0, len(ks)
					if j > 0 {
						lo = marks[j-1].at[tl]
					}
					if j < len(marks) {
						hi = marks[j].at[tl]
					}
					n += hi - lo
				}
				sums.set(orig[s], j, &partSum{kernels: n})
				poisoned.set(orig[s], j, &partSum{kernels: n, filled: true})
				wrong.set(orig[s], j, &partSum{kernels: n + 1, filled: true})
			}
		}
		// The sums are by the original supersteps: key them by each
		// snapshot's copies.
		bySnap := func(ps partSums, orig map[*prog.Superstep]*prog.Superstep) partSums {
			out := partSums{}
			for c, s := range orig {
				if m, ok := ps[s]; ok {
					out[c] = m
				}
			}
			return out
		}
		for round, ps := range []partSums{sums, sums, wrong} {
			p, parts, orig := ct.snapshot()
			compact(p, parts, bySnap(ps, orig), nil, nil)
			if got := ct.shape(p); got != want {
				t.Fatalf("program %d, round %d: compacted to\n%s\nwant\n%s", i, round, got, want)
			}
		}
		for _, m := range sums {
			for j, sum := range m {
				if !sum.filled && sum.kernels > 0 {
					t.Fatalf("program %d: part %d's sum (%d kernels) not filled", i, j, sum.kernels)
				}
			}
		}
		p, parts, orig = ct.snapshot()
		compact(p, parts, bySnap(poisoned, orig), nil, nil)
		if ct.shape(p) != want {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no program compacted otherwise with sums that claim no accesses: the sums are not read")
	}
	t.Logf("%d of 300 programs compacted otherwise with empty sums", moved)
}
