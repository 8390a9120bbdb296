package plan

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/formats/obj/wire"
)

func sampleSchedules() []Exchange {
	return []Exchange{
		{
			Transfers: [][6]int64{{0, 1, 2, 16, 0x80000, 0x80400}, {3, 0, 1, 8, 0x4d000, 0x90000}},
			Events: []ExchangeEvent{
				{Send: 12, Pair: true, Cycles: 8, Arrive: []int64{20, 21}},
				{Send: 30, Cycles: 8, Arrive: []int64{44}},
			},
			Tiles: []ExchangeTile{
				{Tile: 0, Cycles: 60, Code: []uint32{0x1a100080, 0xb0000000, 0xffffffff}},
				{Tile: 3, Cycles: 59, Code: []uint32{1, 2}},
			},
			Makespan: 61, Bound: 40,
			Options: ExchangeOptions{EarlySync: true, Regs: 0x7ffe, Passes: 4},
		},
		{Transfers: [][6]int64{}, Events: []ExchangeEvent{}, Tiles: []ExchangeTile{}, Makespan: 0, Bound: 0},
	}
}

func TestSchedulesRoundTrip(t *testing.T) {
	if got := PackSchedules(nil); got != nil {
		t.Errorf("PackSchedules(nil) = %v, want nil", got)
	}
	if xs, err := UnpackSchedules(nil); err != nil || xs != nil {
		t.Errorf("UnpackSchedules(nil) = %v, %v", xs, err)
	}
	want := sampleSchedules()
	got, err := UnpackSchedules(PackSchedules(want))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// packRaw packs raw varint bytes as PackSchedules frames them.
func packRaw(raw []byte) []byte {
	return append(binary.AppendUvarint(nil, uint64(len(raw))), wire.Compress(raw)...)
}

func TestSchedulesBad(t *testing.T) {
	good := PackSchedules(sampleSchedules())
	size, n := binary.Uvarint(good)
	raw, err := wire.Decompress(good[n:], int(size))
	if err != nil {
		t.Fatal(err)
	}
	outOfRange := sampleSchedules()
	outOfRange[0].Tiles[1].Tile = MaxTiles
	arrivals := sampleSchedules()
	arrivals[0].Events[0].Arrive = []int64{20}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"not zstd", []byte{5, 1, 2, 3, 4, 5}, "exchange_schedules"},
		{"size too large", binary.AppendUvarint(nil, maxScheduleBytes+1), "bad packed size"},
		{"size differs", append(binary.AppendUvarint(nil, size+1), good[n:]...), "exchange_schedules"},
		{"unknown version", packRaw(append([]byte{9}, raw[1:]...)), "unknown version"},
		{"truncated", packRaw(raw[:len(raw)-3]), "varint"},
		{"trailing bytes", packRaw(append(append([]byte{}, raw...), 0)), "after the last schedule"},
		{"huge count", packRaw([]byte{schedulesVersion, 0xff, 0xff, 0xff, 0xff, 0x0f}), "exceeds the bytes left"},
		{"tile out of range", PackSchedules(outOfRange), "exchange_schedules[0].tiles[1].tile"},
		{"arrivals", PackSchedules(arrivals), "exchange_schedules[0].events[0].arrive"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := UnpackSchedules(c.data)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// The signed reader decodes what binary.AppendVarint writes, negative
// values and the extremes included.
func TestUnpackerSigned(t *testing.T) {
	vals := []int64{0, -1, 1, -64, 63, -1 << 62, 1<<63 - 1, -1 << 63}
	var b []byte
	for _, v := range vals {
		b = binary.AppendVarint(b, v)
	}
	d := &unpacker{b: b}
	for _, want := range vals {
		if got := d.s(); got != want || d.err != nil {
			t.Fatalf("s() = %d (err %v), want %d", got, d.err, want)
		}
	}
}

// Schedules that pack to more than the reader takes are not written: a
// plan's schedules always read back.
func TestPackSchedulesBounded(t *testing.T) {
	xs := sampleSchedules()
	// Five bytes a word: just over maxScheduleBytes.
	code := make([]uint32, maxScheduleBytes/5+1)
	for i := range code {
		code[i] = 0xffffffff
	}
	xs[0].Tiles[1].Code = code
	if got := PackSchedules(xs); got != nil {
		t.Fatalf("packed %d bytes of schedules the reader refuses", len(got))
	}
	xs[0].Tiles[1].Code = code[:len(code)-100]
	got, err := UnpackSchedules(PackSchedules(xs))
	if err != nil || len(got) != 2 || len(got[0].Tiles[1].Code) != len(code)-100 {
		t.Fatalf("schedules just under the bound: %v", err)
	}
}
