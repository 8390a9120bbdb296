package plan

// The plan's exchange schedules: the schedules ipu-plan's validation
// link made for the plan's exchange supersteps (one per pattern), which
// ipu-link relocates and validates instead of scheduling again. They are
// the same records a search state keeps (Exchange), packed: a version
// byte, then varints, zstd-compressed, base64 in the JSON. Nothing in
// them is trusted: every count is bounded by the bytes left before
// anything is allocated, the decoded records are range-checked like a
// state's, and libs/sched replays a schedule against its superstep
// before the linker uses it.

import (
	"encoding/binary"
	"fmt"

	"ipu.local/formats/obj/wire"
)

// schedulesVersion is the packed form's version byte.
const schedulesVersion = 1

// maxScheduleBytes bounds the packed schedules once decompressed (the
// 12-layer BERT-base FP16 encoder's take 35.8 MB, its supersteps
// compacted). With the least bytes each record takes, it bounds what
// decoding allocates to about twelve times as much.
const maxScheduleBytes = 64 << 20

// PackSchedules packs xs for Plan.Schedules (nil when there are none,
// or when they pack to more bytes than UnpackSchedules takes: a plan
// then links scheduling its exchanges).
func PackSchedules(xs []Exchange) []byte {
	if len(xs) == 0 {
		return nil
	}
	// Room for every value at 5 bytes (a code word's uvarint takes at
	// most that), so that the encoder's 35.8 MB are not grown by
	// appending (0.7 s of copies in ipu-plan).
	n := 16
	for _, e := range xs {
		n += 16 + 4*len(e.Transfers) + 3*len(e.Tiles)
		for _, x := range e.Transfers {
			n += len(x)
		}
		for _, ev := range e.Events {
			n += 4 + len(ev.Arrive)
		}
		for _, t := range e.Tiles {
			n += len(t.Code)
		}
	}
	b := make([]byte, 1, min(1+5*n, maxScheduleBytes+1)) // past the bound, nil is the answer
	b[0] = schedulesVersion
	u := func(v uint64) { b = binary.AppendUvarint(b, v) }
	s := func(v int64) { b = binary.AppendVarint(b, v) }
	flag := func(f bool) {
		if f {
			u(1)
		} else {
			u(0)
		}
	}
	u(uint64(len(xs)))
	for _, e := range xs {
		u(uint64(len(e.Transfers)))
		for _, x := range e.Transfers {
			for _, v := range x {
				s(v)
			}
		}
		for _, ev := range e.Events {
			s(ev.Send)
			flag(ev.Pair)
			s(ev.Cycles)
			u(uint64(len(ev.Arrive)))
			for _, a := range ev.Arrive {
				s(a)
			}
		}
		u(uint64(len(e.Tiles)))
		for _, t := range e.Tiles {
			s(int64(t.Tile))
			s(t.Cycles)
			u(uint64(len(t.Code)))
			for _, w := range t.Code {
				u(uint64(w))
			}
		}
		s(e.Makespan)
		s(e.Bound)
		flag(e.Options.NoSend2)
		flag(e.Options.EarlySync)
		u(uint64(e.Options.Regs))
		s(int64(e.Options.Passes))
	}
	if len(b) > maxScheduleBytes {
		return nil
	}
	z := wire.Compress(b)
	out := binary.AppendUvarint(nil, uint64(len(b)))
	return append(out, z...)
}

// UnpackSchedules decodes Plan.Schedules and checks the records' ranges.
func UnpackSchedules(data []byte) ([]Exchange, error) {
	if len(data) == 0 {
		return nil, nil
	}
	size, n := binary.Uvarint(data)
	if n <= 0 || size > maxScheduleBytes {
		return nil, errAt("exchange_schedules", "bad packed size")
	}
	raw, err := wire.Decompress(data[n:], int(size))
	if err != nil {
		return nil, errAt("exchange_schedules", "%v", err)
	}
	d := &unpacker{b: raw}
	xs := d.exchanges()
	if d.err != nil {
		return nil, errAt("exchange_schedules", "%v at byte %d", d.err, d.at)
	}
	if d.at != len(d.b) {
		return nil, errAt("exchange_schedules", "%d bytes after the last schedule", len(d.b)-d.at)
	}
	if err := checkExchanges(xs, "exchange_schedules", errAt); err != nil {
		return nil, err
	}
	return xs, nil
}

// unpacker reads the packed form; the first fault sticks.
type unpacker struct {
	b   []byte
	at  int
	err error
}

func (d *unpacker) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *unpacker) u() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.at:])
	if n <= 0 {
		d.fail("truncated or overlong varint")
		return 0
	}
	d.at += n
	return v
}

// s reads a signed varint: u's value zigzag-decoded, as binary.Varint.
func (d *unpacker) s() int64 {
	v := d.u()
	return int64(v>>1) ^ -int64(v&1)
}

// count reads a count of items of at least per bytes each, refusing one
// the bytes left cannot hold.
func (d *unpacker) count(per int) int {
	v := d.u()
	if d.err == nil && v > uint64((len(d.b)-d.at)/per) {
		d.fail("count %d exceeds the bytes left", v)
		return 0
	}
	return int(v)
}

func (d *unpacker) flag() bool {
	v := d.u()
	if v > 1 {
		d.fail("flag %d is not 0 or 1", v)
	}
	return v == 1
}

func (d *unpacker) exchanges() []Exchange {
	if len(d.b) == 0 || d.b[0] != schedulesVersion {
		d.fail("unknown version")
		return nil
	}
	d.at = 1
	xs := make([]Exchange, d.count(8)) // two counts, six fields
	for i := range xs {
		e := &xs[i]
		e.Transfers = make([][6]int64, d.count(10)) // six fields, four of its event
		for k := range e.Transfers {
			for j := range e.Transfers[k] {
				e.Transfers[k][j] = d.s()
			}
		}
		e.Events = make([]ExchangeEvent, len(e.Transfers))
		for k := range e.Events {
			ev := &e.Events[k]
			ev.Send, ev.Pair, ev.Cycles = d.s(), d.flag(), d.s()
			ev.Arrive = make([]int64, d.count(1))
			for j := range ev.Arrive {
				ev.Arrive[j] = d.s()
			}
		}
		e.Tiles = make([]ExchangeTile, d.count(3)) // tile, cycles, count
		for k := range e.Tiles {
			t := &e.Tiles[k]
			t.Tile, t.Cycles = int(d.s()), d.s()
			t.Code = make([]uint32, d.count(1))
			for j := range t.Code {
				w := d.u()
				if w > 1<<32-1 {
					d.fail("code word %d out of range", w)
				}
				t.Code[j] = uint32(w)
			}
		}
		e.Makespan, e.Bound = d.s(), d.s()
		e.Options.NoSend2, e.Options.EarlySync = d.flag(), d.flag()
		regs := d.u()
		if regs > 1<<16-1 {
			d.fail("regs %d out of range", regs)
		}
		e.Options.Regs = uint16(regs)
		e.Options.Passes = int(d.s())
		if d.err != nil {
			return nil
		}
	}
	return xs
}
