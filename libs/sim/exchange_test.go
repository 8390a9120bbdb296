package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// On ipu21-tiny every tile is in one column: latency 10 between any two.
const lat = 10

// sendAt is the cycle the senders send at; T the first arrival.
const (
	sendAt = 40
	T      = sendAt + lat
)

// sender sends n words from dataBase to the tiles dst (d operand) at cycle
// sendAt, with send2 if pair, then syncs and halts. The send is at pcOf(4).
func sender(dst int32, n int32, pair bool) []uint32 {
	s := send(1, 2, 3)
	if pair {
		s = send2(1, 2, 3)
	}
	return assemble(li(1, dst), li(2, dataBase), li(3, n), delay(sendAt-24), s, sync_(), halt())
}

// receiver arms one or two recv windows from src, the first (at pcOf(6))
// at cycle at, the second 6 cycles later, then syncs. After the sync it
// copies the first received word to dataBase+0x200.
func receiver(src int32, at int64, sizes ...int32) []uint32 {
	s1 := int32(0)
	if len(sizes) > 1 {
		s1 = sizes[1]
	}
	items := []any{li(1, src), li(2, dataBase+0x100), li(3, sizes[0]), li(5, dataBase+0x100+4*sizes[0]), li(6, s1),
		delay(int32(at - 36)), recv(1, 2, 3)}
	if len(sizes) > 1 {
		items = append(items, recv(1, 5, 6))
	}
	items = append(items, delay(40), sync_(), ldm(4, 2, 0), stm(4, 2, 0x100), halt())
	return assemble(items...)
}

func TestExchange(t *testing.T) {
	data := words(dataBase, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88)
	tests := []struct {
		name  string
		progs map[int][]uint32
		want  *faultKey
		recv  []int // tiles that must hold the data afterwards
	}{
		{"delivered", map[int][]uint32{0: sender(1, 4, false), 1: receiver(0, T, 4)}, nil, []int{1}},
		{"delivered send2", map[int][]uint32{0: sender(1, 4, true), 1: receiver(0, T, 4)}, nil, []int{1}},
		{"delivered in two windows", map[int][]uint32{0: sender(1, 8, false), 1: receiver(0, T, 6, 2)}, nil, []int{1}},
		{"multicast", map[int][]uint32{
			0: sender(1|3<<16, 4, false), 1: receiver(0, T, 4),
			2: receiver(0, T, 4), 3: receiver(0, T, 4)}, nil, []int{1, 2, 3}},
		{"receiver one cycle early", map[int][]uint32{0: sender(1, 4, false), 1: receiver(0, T-1, 4)},
			&faultKey{FaultSilent, 1, supCtx, pcOf(6), 0, T - 1}, nil},
		{"receiver one cycle late", map[int][]uint32{0: sender(1, 4, false), 1: receiver(0, T+1, 4)},
			&faultKey{FaultNoListener, 0, supCtx, pcOf(4), 0, T}, nil},
		{"nobody listening", map[int][]uint32{0: sender(1, 4, false), 1: assemble(sync_(), halt())},
			&faultKey{FaultNoListener, 0, supCtx, pcOf(4), 0, T}, nil},
		{"listening to another tile", map[int][]uint32{0: sender(1, 4, false), 1: receiver(2, T, 4), 2: assemble(sync_(), halt())},
			&faultKey{FaultNoListener, 0, supCtx, pcOf(4), 0, T}, nil},
		{"silent sender", map[int][]uint32{0: assemble(sync_(), halt()), 1: receiver(0, T, 4)},
			&faultKey{FaultSilent, 1, supCtx, pcOf(6), 0, T}, nil},
		{"window cut by the next recv", map[int][]uint32{0: sender(1, 8, false), 1: receiver(0, T, 8, 2)},
			&faultKey{FaultSilent, 1, supCtx, pcOf(6), 0, T + 6}, nil},
		{"more words than the window", map[int][]uint32{0: sender(1, 4, false), 1: receiver(0, T, 2)},
			&faultKey{FaultNoListener, 0, supCtx, pcOf(4), 0, T + 2}, nil},
		// A run of cycles is taken whole only when the window holds all its
		// words: here the second cycle's second word has no window.
		{"send2 past the window", map[int][]uint32{0: sender(1, 4, true), 1: receiver(0, T, 3)},
			&faultKey{FaultNoListener, 0, supCtx, pcOf(4), 0, T + 1}, nil},
		// The barrier does not end a window: words still arriving after the
		// receiver's sync are received.
		{"window outlives the barrier", map[int][]uint32{0: sender(1, 8, false), 1: assemble(li(1, 0), li(2, dataBase+0x100), li(3, 8), delay(T-24), recv(1, 2, 3), sync_(), halt())},
			nil, nil},
		{"silent after the barrier", map[int][]uint32{0: sender(1, 4, false), 1: assemble(li(1, 0), li(2, dataBase+0x100), li(3, 8), delay(T-24), recv(1, 2, 3), sync_(), halt())},
			&faultKey{FaultSilent, 1, supCtx, pcOf(4), 0, T + 4}, nil},
		{"two senders", map[int][]uint32{0: sender(1, 4, false), 2: sender(1, 4, false), 1: receiver(0, T, 4)},
			&faultKey{FaultTwoSenders, 1, supCtx, pcOf(6), 0, T}, nil},
		{"supertile shares its bus", map[int][]uint32{
			0: sender(2, 4, false), 1: sender(3, 4, false),
			2: receiver(0, T, 4), 3: receiver(1, T, 4)}, nil, []int{2, 3}},
		{"bus conflict", map[int][]uint32{
			0: sender(2, 4, true), 1: sender(3, 4, false),
			2: receiver(0, T, 4), 3: receiver(1, T, 4)},
			&faultKey{FaultBus, 1, supCtx, pcOf(4), 0, sendAt}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "ipu21-tiny", Options{Parallel: 2})
			for tile, code := range tc.progs {
				r.load(tile, code, data)
			}
			res, err := r.m.Run(nil, 0)
			if tc.want != nil {
				if err == nil {
					t.Fatal("no fault")
				}
				if diff := cmp.Diff(*tc.want, keyOf(t, err)); diff != "" {
					t.Errorf("fault %v: mismatch (-want +got):\n%s", err, diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.AtHost || len(res.Phases) != 2 || r.m.Mark() != 1 {
				t.Errorf("at host %v, %d phases, mark %d; want false, 2, 1", res.AtHost, len(res.Phases), r.m.Mark())
			}
			want := []uint32{0x11, 0x22, 0x33, 0x44}
			if tc.name == "delivered in two windows" {
				want = append(want, 0x55, 0x66, 0x77, 0x88)
			}
			for _, u := range tc.recv {
				var got []uint32
				for i := uint32(0); i < uint32(len(want)); i++ {
					got = append(got, r.word(u, dataBase+0x100+4*i))
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("tile %d received: mismatch (-want +got):\n%s", u, diff)
				}
				if got := r.word(u, dataBase+0x200); got != 0x11 {
					t.Errorf("tile %d read %#x after the sync, want 0x11", u, got)
				}
			}
			if got := res.Phases[0].ExchangeBytes[0]; tc.recv != nil && got != 4*int64(len(want)) {
				t.Errorf("exchange bytes of tile 0 = %d, want %d", got, 4*len(want))
			}
		})
	}
}

// TestReceivedDataInvisibleBeforeSync checks that received words land at
// the barrier, not before.
func TestReceivedDataInvisibleBeforeSync(t *testing.T) {
	r := newRig(t, "ipu21-tiny", Options{})
	r.load(0, sender(1, 4, false), words(dataBase, 1, 2, 3, 4))
	r.load(1, assemble(li(1, 0), li(2, dataBase+0x100), li(3, 4), delay(T-24), recv(1, 2, 3),
		delay(20), ldm(4, 2, 0), stm(4, 2, 0x100), sync_(), halt()))
	if _, err := r.m.Run(nil, 0); err != nil {
		t.Fatal(err)
	}
	if got := r.word(1, dataBase+0x200); got != 0 {
		t.Errorf("read %#x before the sync, want 0", got)
	}
	if got := r.word(1, dataBase+0x100); got != 1 {
		t.Errorf("received %#x, want 1", got)
	}
}

// TestExchangeResolvedSideBySide resolves one exchange superstep of 32
// senders and 32 receivers on 1 to 5 goroutines: the received words, and
// with faulty receivers the fault, are the same on every count, and the
// fault is the earliest one (by cycle, then tile) wherever its receiver
// falls among the goroutines' parts.
func TestExchangeResolvedSideBySide(t *testing.T) {
	const pairs = 32
	late := map[int]int64{3: T - 1, 9: T - 1, 17: T - 1, 25: T - 1, 12: T - 2, 28: T - 2, 5: T + 1, 20: T + 1}
	run := func(t *testing.T, parallel int, faulty bool) (faultKey, [][]uint32) {
		r := newRig(t, "ipu21-64", Options{Parallel: parallel})
		for i := 0; i < pairs; i++ {
			base := uint32(i)<<8 | 1
			r.load(i, sender(int32(pairs+i), 4, false), words(dataBase, base, base+1, base+2, base+3))
			at := int64(T)
			if l, ok := late[i]; ok && faulty {
				at = l
			}
			r.load(pairs+i, receiver(int32(i), at, 4))
		}
		_, err := r.m.Run(nil, 0)
		if faulty {
			if err == nil {
				t.Fatal("no fault")
			}
			return keyOf(t, err), nil
		}
		if err != nil {
			t.Fatal(err)
		}
		got := make([][]uint32, pairs)
		for i := range got {
			for k := uint32(0); k < 4; k++ {
				got[i] = append(got[i], r.word(pairs+i, dataBase+0x100+4*k))
			}
		}
		return faultKey{}, got
	}
	_, want := run(t, 1, false)
	for i, ws := range want {
		if base := uint32(i)<<8 | 1; ws[0] != base || ws[3] != base+3 {
			t.Fatalf("tile %d received %#x, want from %#x", pairs+i, ws, base)
		}
	}
	wantFault := faultKey{FaultSilent, pairs + 12, supCtx, pcOf(6), 0, T - 2}
	for par := 1; par <= 5; par++ {
		if _, got := run(t, par, false); !cmp.Equal(want, got) {
			t.Errorf("parallel %d: received %#x, want %#x", par, got, want)
		}
		if got, _ := run(t, par, true); got != wantFault {
			t.Errorf("parallel %d: fault %+v, want %+v", par, got, wantFault)
		}
	}
}

// TestExchangeResolvedSideBySidePairs is TestExchangeResolvedSideBySide
// with send2 (the even tiles, their odd neighbours idle) and one
// multicast to 15 tiles (the most li can name): the received words, and with receivers early or
// late the fault, are the same on 1 to 5 goroutines.
func TestExchangeResolvedSideBySidePairs(t *testing.T) {
	const first, mcast, mfirst, mn, last = 32, 30, 47, 15, 62
	// Receiver first+k listens to tile 2k (k < 15); tiles 47..61 to the
	// multicast of tile 30; 62 and 63 are idle.
	src := func(u int) int {
		if u >= mfirst {
			return mcast
		}
		return 2 * (u - first)
	}
	shift := map[int]int64{35: -1, 40: +1, 50: -2, 60: -1, 61: +1}
	run := func(t *testing.T, parallel int, faulty bool) (string, [][]uint32) {
		r := newRig(t, "ipu21-64", Options{Parallel: parallel})
		for s := 0; s < first; s++ {
			base := uint32(s)<<8 | 1
			data := words(dataBase, base, base+1, base+2, base+3)
			switch {
			case s == mcast:
				r.load(s, sender(mfirst|mn<<16, 4, true), data)
			case s%2 == 0:
				r.load(s, sender(int32(first+s/2), 4, true), data)
			default:
				r.load(s, assemble(sync_(), halt()))
			}
		}
		r.load(62, assemble(sync_(), halt()))
		r.load(63, assemble(sync_(), halt()))
		for u := first; u < last; u++ {
			at := int64(T)
			if d, ok := shift[u]; ok && faulty {
				at += d
			}
			r.load(u, receiver(int32(src(u)), at, 4))
		}
		_, err := r.m.Run(nil, 0)
		if faulty {
			if err == nil {
				t.Fatal("no fault")
			}
			return fmt.Sprintf("%+v", keyOf(t, err)), nil
		}
		if err != nil {
			t.Fatal(err)
		}
		var got [][]uint32
		for u := first; u < last; u++ {
			var ws []uint32
			for k := uint32(0); k < 4; k++ {
				ws = append(ws, r.word(u, dataBase+0x100+4*k))
			}
			got = append(got, ws)
		}
		return "", got
	}
	_, want := run(t, 1, false)
	for i, ws := range want {
		if base := uint32(src(first+i))<<8 | 1; ws[0] != base || ws[3] != base+3 {
			t.Fatalf("tile %d received %#x, want from %#x", first+i, ws, base)
		}
	}
	wantFault, _ := run(t, 1, true)
	if !strings.Contains(wantFault, fmt.Sprintf("Tile:%d", 50)) {
		t.Fatalf("fault %s, want the silent window of tile 50 (the earliest)", wantFault)
	}
	for par := 2; par <= 5; par++ {
		if _, got := run(t, par, false); !cmp.Equal(want, got) {
			t.Errorf("parallel %d: received %#x, want %#x", par, got, want)
		}
		if got, _ := run(t, par, true); got != wantFault {
			t.Errorf("parallel %d: fault %s, want %s", par, got, wantFault)
		}
	}
}
