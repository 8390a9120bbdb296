package sched

import (
	"encoding/binary"
	"testing"

	"ipu.local/libs/arch"
)

// FuzzSchedule decodes a phase from bytes (8 bytes a transfer; bits 1-7
// of its sixth byte give the destination stride) on a 64-tile machine: Schedule must either reject it or produce code that
// Validate accepts, and never panic.
func FuzzSchedule(f *testing.F) {
	f.Add([]byte{0, 1, 1, 4, 0, 0, 0, 0})
	f.Add([]byte{0, 1, 63, 32, 0, 0, 0, 0, 5, 1, 1, 7, 1, 0, 3, 0})
	f.Add([]byte{1, 0, 1, 1, 0, 0, 0, 0, 2, 0, 1, 1, 0, 0, 1, 0, 3, 0, 1, 1, 0, 0, 2, 0})
	f.Add([]byte{0, 2, 1, 64, 0, 0, 0, 0, 1, 3, 1, 64, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 1, 4, 16, 0, 6, 0, 0, 9, 2, 3, 8, 2, 4, 0, 1}) // strided multicasts
	p := arch.MustLookup("ipu21-64")
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 8*64 {
			return
		}
		var ph []Transfer
		for ; len(b) >= 8; b = b[8:] {
			ph = append(ph, Transfer{
				Src:     int(b[0] % 70),
				Dst:     int(b[1] % 70),
				DstN:    int(b[2] % 8),
				Stride:  int(b[5]>>1) % 6,
				Words:   int(b[3]),
				SrcAddr: srcBase + 4*uint32(b[4]) + uint32(b[5]&1),
				DstAddr: dstBase + 4*uint32(binary.LittleEndian.Uint16(b[6:])),
			})
		}
		opt := Options{}
		if len(b) > 0 {
			opt = Options{NoSend2: b[0]&1 != 0, EarlySync: b[0]&2 != 0, Regs: uint16(b[0]>>2) | 0x7, Passes: 1}
		}
		pl, err := Schedule(p, ph, opt)
		if err != nil {
			return
		}
		if err := Validate(p, ph, pl); err != nil {
			t.Fatal(err)
		}
		if pl.LowerBound > pl.Makespan {
			t.Fatalf("lower bound %d above makespan %d", pl.LowerBound, pl.Makespan)
		}
	})
}
