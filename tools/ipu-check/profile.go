package main

import (
	"encoding/binary"
	"fmt"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/formats/profile"
	"ipu.local/libs/arch"
	"ipu.local/libs/device"
	"ipu.local/libs/sim"
)

// This file holds the profile of the first inference: the branches taken,
// the tiles' counters and the profile built from the run's result.

// branchesTaken reads which side each branch of the package took in the
// last call: the condition word the tiles branched on, which the
// program keeps where it was.
func branchesTaken(s *device.Session, pkg *ipuexe.Package) ([]bool, error) {
	var out []bool
	for _, b := range pkg.Host.Branches {
		w, err := s.ReadTile(b.CondTile, b.CondAddr, int(b.CondBytes))
		if err != nil {
			return nil, fmt.Errorf("branch If %q: condition: %w", b.If, err)
		}
		out = append(out, b.Taken(w))
	}
	return out, nil
}

// profileCounters reads every tile's profile buffer (obj.ProfileSymbol)
// back from the device after a run: by tile, the words its supervisor
// stored, one per compute phase of the package (nil for a tile without
// the buffer).
func profileCounters(s *device.Session, pkg *ipuexe.Package) ([][]uint32, error) {
	out := make([][]uint32, pkg.Tiles)
	for t := 0; t < pkg.Tiles && t < len(pkg.TileImage); t++ {
		img := pkg.Images[pkg.TileImage[t]]
		for _, sym := range img.Symbols {
			if sym.Name != obj.ProfileSymbol {
				continue
			}
			b, err := s.ReadTile(t, sym.Addr, int(sym.Size))
			if err != nil {
				return nil, fmt.Errorf("tile %d: profile buffer: %w", t, err)
			}
			w := make([]uint32, len(b)/4)
			for k := range w {
				w[k] = binary.LittleEndian.Uint32(b[4*k:])
			}
			out[t] = w
		}
	}
	return out, nil
}

// buildProfile turns the first inference's run into the profile artifact.
// taken says which side each of the package's branches took; counters
// are the tiles' profile buffers (profileCounters), which give each
// compute phase's TileCounters.
func buildProfile(pkg *ipuexe.Package, fingerprint string, res *sim.RunResult, samplePeriod int64, taken []bool, counters [][]uint32) (*profile.Profile, error) {
	preset, err := arch.Lookup(pkg.Arch)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	p := &profile.Profile{
		Arch:         pkg.Arch,
		Fingerprint:  fingerprint,
		Tiles:        pkg.Tiles,
		ClockHz:      preset.ClockHz,
		SamplePeriod: samplePeriod,
		TotalCycles:  res.Cycles,
		Inferences:   1,
	}
	// The run call's supersteps are the package's phases on the path the
	// branches took, in order, when the counts agree; otherwise their
	// kinds are unknown.
	path := pkg.Host.PhasePath(taken)
	named := len(res.Phases) == len(path)
	for k, b := range pkg.Host.Branches {
		pb := profile.Branch{If: b.If, ThenRan: taken[k]}
		lo, hi := b.Else[0], b.Else[1]
		if taken[k] {
			lo, hi = b.Then[0], b.Then[1]
		}
		for j, i := range path {
			if named && i >= lo && i < hi {
				pb.Cycles += res.Phases[j].Cycles + res.Phases[j].SyncCycles
			}
		}
		p.Branches = append(p.Branches, pb)
	}
	for j, ph := range res.Phases {
		pp := profile.Phase{
			Index:         ph.Phase,
			Cycles:        ph.Cycles,
			SyncCycles:    ph.SyncCycles,
			TileCycles:    ph.TileCycles,
			ExchangeBytes: ph.ExchangeBytes,
			HostBytes:     ph.HostBytes,
			Instructions:  ph.Instructions,
		}
		if named {
			i := path[j]
			pp.Kind = phaseKind(pkg.Host.Phases[i].Kind)
			pp.Name = pkg.Host.Phases[i].Name
			pp.TileCounters = phaseCounters(pkg, i, counters)
		}
		p.Phases = append(p.Phases, pp)
	}
	for _, sm := range res.Samples {
		p.Samples = append(p.Samples, profile.Sample{Tile: sm.Tile, Phase: sm.Phase, Cycle: sm.Cycle, PC: sm.PC})
	}
	return p, nil
}

// phaseCounters is package phase i's word of every tile's profile
// buffer (nil when i is not a compute phase or no tile has the word).
func phaseCounters(pkg *ipuexe.Package, i int, counters [][]uint32) []int64 {
	if pkg.Host.Phases[i].Kind != obj.Compute {
		return nil
	}
	w := 0
	for _, ph := range pkg.Host.Phases[:i] {
		if ph.Kind == obj.Compute {
			w++
		}
	}
	var out []int64
	for t, ws := range counters {
		if w >= len(ws) {
			continue
		}
		if out == nil {
			out = make([]int64, len(counters))
		}
		out[t] = int64(ws[w])
	}
	return out
}

func phaseKind(k obj.PhaseKind) profile.Kind {
	switch k {
	case obj.Compute:
		return profile.KindCompute
	case obj.Exchange:
		return profile.KindExchange
	case obj.HostExchange:
		return profile.KindHost
	}
	return profile.KindUnknown
}
