package link

import (
	"fmt"

	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/sim"
)

// Simulate runs a linked object on a fresh in-memory simulator, without
// a device file: the startup to the first host sync, then one call with
// inputs (each input's raw row-major little-endian bytes, in the host
// program's order). It returns the outputs in the same form and the
// call's result (per-superstep cycles). Tests and benchmarks use it to
// compare the simulated cycles with Stats.
func Simulate(o *obj.Object, inputs [][]byte, opt sim.Options) ([][]byte, *sim.RunResult, error) {
	outs, res, _, err := simulate(o, inputs, opt)
	return outs, res, err
}

// simulate is Simulate that also returns every tile's memory after the
// call (nil for a tile never touched).
func simulate(o *obj.Object, inputs [][]byte, opt sim.Options) ([][]byte, *sim.RunResult, [][]byte, error) {
	p, err := arch.Lookup(o.Arch)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(inputs) != len(o.Host.Inputs) {
		return nil, nil, nil, fmt.Errorf("%d inputs for the object's %d", len(inputs), len(o.Host.Inputs))
	}
	mem := make([][]byte, p.Tiles)
	m := sim.New(p, func(tile int) []byte {
		if mem[tile] == nil {
			mem[tile] = make([]byte, p.Memory.Size())
		}
		return mem[tile]
	}, opt)
	m.Reset()
	for _, tl := range o.Tiles {
		img := sim.Image{Entry: tl.Entry}
		for _, s := range tl.Segments {
			if s.Kind != obj.BSS {
				img.Segments = append(img.Segments, sim.Segment{Addr: s.Addr, Data: s.Data, Code: s.Kind == obj.Code})
			}
		}
		if err := m.Load(tl.Index, img); err != nil {
			return nil, nil, nil, fmt.Errorf("load tile %d: %w", tl.Index, err)
		}
	}
	host := pages{}
	for _, pg := range o.Host.Pages {
		host[pg.ID] = make([]byte, pg.Bytes)
	}
	if _, err := m.Run(host, 0); err != nil {
		return nil, nil, nil, fmt.Errorf("startup: %w", err)
	}
	for i, in := range o.Host.Inputs {
		if err := in.Scatter(host[in.Page], inputs[i]); err != nil {
			return nil, nil, nil, fmt.Errorf("input %q: %w", in.Name, err)
		}
	}
	res, err := m.Run(host, 0)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("run: %w", err)
	}
	outs := make([][]byte, len(o.Host.Outputs))
	for i, ot := range o.Host.Outputs {
		b, err := ot.Gather(host[ot.Page])
		if err != nil {
			return nil, nil, nil, fmt.Errorf("output %q: %w", ot.Name, err)
		}
		outs[i] = b
	}
	return outs, res, mem, nil
}

// pages is the host memory of a run: page<<24 | offset.
type pages map[uint8][]byte

func (h pages) at(addr uint32, n int) ([]byte, error) {
	pg, off := uint8(addr>>24), int(addr&0xFFFFFF)
	b, ok := h[pg]
	if !ok || off+n > len(b) {
		return nil, fmt.Errorf("host address %#x +%d outside the pages", addr, n)
	}
	return b[off : off+n], nil
}

func (h pages) ReadHost(addr uint32, dst []byte) error {
	b, err := h.at(addr, len(dst))
	if err == nil {
		copy(dst, b)
	}
	return err
}

func (h pages) WriteHost(addr uint32, src []byte) error {
	b, err := h.at(addr, len(src))
	if err == nil {
		copy(b, src)
	}
	return err
}
