package profile

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// topTiles is how many of the busiest tiles Dump lists.
const topTiles = 10

// histogramBuckets is the number of buckets of Dump's tile-cycle histogram.
const histogramBuckets = 10

// histogramBar is the width of the longest histogram bar.
const histogramBar = 40

// Dump writes a stable text summary of p: the header fields, one line per
// superstep, the busiest tiles, a histogram of per-tile cycles, the sample
// count with the most sampled PCs, and the exchange traffic.
func Dump(w io.Writer, p *Profile) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "profile version %d\n", Version)
	fmt.Fprintf(bw, "arch %s\n", p.Arch)
	fmt.Fprintf(bw, "fingerprint %s\n", p.Fingerprint)
	fmt.Fprintf(bw, "tiles %d\n", p.Tiles)
	fmt.Fprintf(bw, "clock_hz %s\n", strconv.FormatFloat(p.ClockHz, 'f', -1, 64))
	fmt.Fprintf(bw, "inferences %d\n", p.Inferences)
	fmt.Fprintf(bw, "total_cycles %d\n", p.TotalCycles)
	fmt.Fprintf(bw, "sample_period %d\n", p.SamplePeriod)

	fmt.Fprintf(bw, "\nphases %d\n", len(p.Phases))
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "index\tkind\tcycles\tsync_cycles\tactive_tiles\texchange_bytes\thost_bytes\tinstructions\t name\n")
	var sumCycles, sumSync, sumExchange, sumHost, sumInstr int64
	for _, ph := range p.Phases {
		active := 0
		for _, c := range ph.TileCycles {
			if c > 0 {
				active++
			}
		}
		ex := sum(ph.ExchangeBytes)
		name := ""
		if ph.Name != "" {
			name = " " + ph.Name
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n",
			ph.Index, ph.Kind, ph.Cycles, ph.SyncCycles, active, ex, ph.HostBytes, ph.Instructions, name)
		sumCycles += ph.Cycles
		sumSync += ph.SyncCycles
		sumExchange += ex
		sumHost += ph.HostBytes
		sumInstr += ph.Instructions
	}
	fmt.Fprintf(tw, "total\t\t%d\t%d\t\t%d\t%d\t%d\t\n", sumCycles, sumSync, sumExchange, sumHost, sumInstr)
	if err := tw.Flush(); err != nil {
		return err
	}

	for _, b := range p.Branches {
		side := "else"
		if b.ThenRan {
			side = "then"
		}
		fmt.Fprintf(bw, "branch If %q: the %s side ran, %d cycles\n", b.If, side, b.Cycles)
	}

	dumpCounters(bw, p.Phases)

	perTile := make([]int64, tileCount(p))
	for _, ph := range p.Phases {
		for t, c := range ph.TileCycles {
			if t < len(perTile) {
				perTile[t] += c
			}
		}
	}
	dumpTopTiles(bw, perTile)
	dumpHistogram(bw, perTile)
	dumpSamples(bw, p.Samples)

	fmt.Fprintf(bw, "\nexchange_bytes %d\n", sumExchange)
	perTileEx := make([]int64, tileCount(p))
	for _, ph := range p.Phases {
		for t, b := range ph.ExchangeBytes {
			if t < len(perTileEx) {
				perTileEx[t] += b
			}
		}
	}
	senders := 0
	var most int64
	mostTile := -1
	for t, b := range perTileEx {
		if b > 0 {
			senders++
		}
		if b > most {
			most, mostTile = b, t
		}
	}
	fmt.Fprintf(bw, "  sending_tiles %d\n", senders)
	if mostTile >= 0 {
		fmt.Fprintf(bw, "  busiest_sender tile %d bytes %d\n", mostTile, most)
	}
	fmt.Fprintf(bw, "host_bytes %d\n", sumHost)
	return bw.Flush()
}

// dumpTopTiles lists the tiles with the most cycles over all phases,
// busiest first, ties in tile order.
func dumpTopTiles(w io.Writer, perTile []int64) {
	idx := make([]int, 0, len(perTile))
	for t, c := range perTile {
		if c > 0 {
			idx = append(idx, t)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return perTile[idx[a]] > perTile[idx[b]] })
	fmt.Fprintf(w, "\nactive_tiles %d\n", len(idx))
	n := min(topTiles, len(idx))
	fmt.Fprintf(w, "top %d tiles by cycles\n", n)
	for _, t := range idx[:n] {
		fmt.Fprintf(w, "  tile %d cycles %d\n", t, perTile[t])
	}
}

// dumpHistogram buckets the active tiles' cycle counts into equal-width
// ranges between the smallest and the largest.
func dumpHistogram(w io.Writer, perTile []int64) {
	var lo, hi int64 = -1, -1
	for _, c := range perTile {
		if c <= 0 {
			continue
		}
		if lo < 0 || c < lo {
			lo = c
		}
		if c > hi {
			hi = c
		}
	}
	fmt.Fprintf(w, "histogram of active tile cycles\n")
	if lo < 0 {
		fmt.Fprintf(w, "  (no active tiles)\n")
		return
	}
	width := (hi - lo + histogramBuckets) / histogramBuckets // ceil((hi-lo+1)/buckets)
	counts := make([]int, histogramBuckets)
	for _, c := range perTile {
		if c > 0 {
			counts[(c-lo)/width]++
		}
	}
	most := 0
	for _, n := range counts {
		most = max(most, n)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
	for b, n := range counts {
		from := lo + int64(b)*width
		if from > hi {
			break
		}
		bar := n * histogramBar / most
		if n > 0 && bar == 0 {
			bar = 1
		}
		fmt.Fprintf(tw, "  [%d,\t%d)\t%d\t", from, from+width, n)
		if bar > 0 {
			fmt.Fprintf(tw, " %s", strings.Repeat("#", bar))
		}
		fmt.Fprintf(tw, "\n")
	}
	tw.Flush()
}

// dumpSamples gives the sample count and the most sampled PCs.
func dumpSamples(w io.Writer, samples []Sample) {
	fmt.Fprintf(w, "\nsamples %d\n", len(samples))
	if len(samples) == 0 {
		return
	}
	counts := map[uint32]int{}
	for _, s := range samples {
		counts[s.PC]++
	}
	pcs := make([]uint32, 0, len(counts))
	for pc := range counts {
		pcs = append(pcs, pc)
	}
	sort.Slice(pcs, func(a, b int) bool {
		if counts[pcs[a]] != counts[pcs[b]] {
			return counts[pcs[a]] > counts[pcs[b]]
		}
		return pcs[a] < pcs[b]
	})
	n := min(topTiles, len(pcs))
	fmt.Fprintf(w, "top %d sampled pcs\n", n)
	for _, pc := range pcs[:n] {
		fmt.Fprintf(w, "  pc %#x samples %d\n", pc, counts[pc])
	}
}

// dumpCounters lists, for every phase with tile counters (the values
// the tiles stored in their profile buffers), the tiles that stored one
// and the largest with its tile.
func dumpCounters(w io.Writer, phases []Phase) {
	first := true
	for _, ph := range phases {
		if len(ph.TileCounters) == 0 {
			continue
		}
		if first {
			fmt.Fprintf(w, "\ntile counters (profile buffers)\n")
			first = false
		}
		nonzero, most, mostTile := 0, int64(0), -1
		for t, c := range ph.TileCounters {
			if c > 0 {
				nonzero++
			}
			if c > most {
				most, mostTile = c, t
			}
		}
		fmt.Fprintf(w, "  phase %d: %d tiles, largest %d (tile %d)\n", ph.Index, nonzero, most, mostTile)
	}
}

// tileCount is the length of the per-tile tables: the longest per-tile
// list, so that a profile that was not validated cannot make Dump
// allocate more than it holds.
func tileCount(p *Profile) int {
	n := 0
	for _, ph := range p.Phases {
		n = max(n, len(ph.TileCycles), len(ph.ExchangeBytes))
	}
	return n
}

func sum(v []int64) int64 {
	var s int64
	for _, x := range v {
		s += x
	}
	return s
}
