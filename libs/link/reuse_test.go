package link

import (
	"bytes"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
	"ipu.local/libs/prog"
	"ipu.local/libs/sched"
)

// TestExchangeReuse links a two-layer encoder, whose second layer moves
// the first one's exchange patterns at other addresses: some supersteps
// reuse an earlier schedule, each logs the line naming it, and the
// object is byte for byte the one scheduling every superstep from
// scratch gives. The simulator runs it in the linker's cycles.
func TestExchangeReuse(t *testing.T) {
	if testing.Short() {
		t.Skip("plans a transformer")
	}
	const model = "../../testdata/models/transformers/bert_small_encoder2/model.onnx"
	pl, o, st, g := linkModel(t, model, "ipu21", 64)
	if st.ReusedExchanges == 0 {
		t.Fatal("no exchange superstep reused a schedule")
	}
	exchanges := 0
	for _, s := range st.Supersteps {
		if s.Kind == obj.Exchange {
			exchanges++
		}
	}
	t.Logf("%d exchange supersteps: %d reused, %d refused", exchanges, st.ReusedExchanges, st.RefusedReuses)
	// The log names exactly the reused supersteps.
	var buf bytes.Buffer
	o2, st2, err := Link(pl, "test", Options{Log: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "reused exchange optimization after validating relocated rows"); n != st.ReusedExchanges || st2.ReusedExchanges != st.ReusedExchanges {
		t.Fatalf("%d reuse lines, %d and %d reused supersteps", n, st.ReusedExchanges, st2.ReusedExchanges)
	}
	// Without reuse: the same object, nothing reused.
	o3, st3, err := Link(pl, "test", Options{NoExchangeReuse: true})
	if err != nil {
		t.Fatal(err)
	}
	if st3.ReusedExchanges != 0 {
		t.Fatalf("%d reused with reuse off", st3.ReusedExchanges)
	}
	// One core: the same object whatever order the work completes in.
	procs := runtime.GOMAXPROCS(1)
	o4, _, err := Link(pl, "test", Options{})
	runtime.GOMAXPROCS(procs)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := encode(t, o), encode(t, o2), encode(t, o3)
	if !bytes.Equal(a, encode(t, o4)) {
		t.Fatal("the object linked on one core differs")
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two links of one plan differ")
	}
	if !bytes.Equal(a, c) {
		t.Fatal("the object with reused schedules differs from the one scheduled from scratch")
	}
	checkModel(t, o, st, g)
}

func encode(t *testing.T, o *obj.Object) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := obj.Write(&buf, o); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestExchangeReuseRefused lowers four exchange supersteps of one
// pattern: the second is the first at other addresses and reuses its
// schedule; in the third, tile 0 sends one buffer twice where the first
// sent two, which changes the schedule (one load fewer): its relocation
// is refused and it is scheduled from scratch; the fourth, the third at
// other addresses, is refused the first's schedule too and relocates
// the third's. Each plan is the one Schedule makes. A link given the
// schedules this one saved (the first's and the third's) schedules
// nothing: the third relocates its saved one, the fourth the third's.
func TestExchangeReuseRefused(t *testing.T) {
	p := arch.MustLookup("ipu21-64")
	buf := func(addr uint32) *prog.Buffer { return &prog.Buffer{Addr: addr, Placed: true} }
	step := func(a, b, dst uint32) *prog.Superstep {
		s := prog.NewSuperstep(obj.Exchange, "x")
		s.Xfers = []prog.Transfer{
			{Src: 0, Dst: 1, Words: 8, From: prog.Ref{Buf: buf(a)}, To: prog.Ref{Buf: buf(dst)}},
			{Src: 0, Dst: 2, Words: 8, From: prog.Ref{Buf: buf(b)}, To: prog.Ref{Buf: buf(dst)}},
			{Src: 3, Dst: 0, DstN: 2, Words: 6, From: prog.Ref{Buf: buf(a)}, To: prog.Ref{Buf: buf(dst + 0x100)}},
		}
		return s
	}
	program := func() *prog.Program {
		return &prog.Program{Steps: []*prog.Superstep{
			step(0x60000, 0x60100, 0x80000),
			prog.NewSuperstep(obj.Compute, "c"),
			step(0x61000, 0x61100, 0x81000),
			step(0x62000, 0x62000, 0x82000),
			step(0x63000, 0x63000, 0x83000),
		}}
	}
	var out bytes.Buffer
	l := &linker{p: p, tiles: map[int]*tile{}, prog: program()}
	if err := l.lowerExchanges(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))); err != nil {
		t.Fatal(err)
	}
	if l.st.ReusedExchanges != 2 || l.st.RefusedReuses != 1 {
		t.Fatalf("%d reused, %d refused; want 2 and 1", l.st.ReusedExchanges, l.st.RefusedReuses)
	}
	lines := strings.Count(out.String(), "reused exchange optimization after validating relocated rows")
	if lines != 2 || !strings.Contains(out.String(), "reused exchange optimization after validating relocated rows\" phase=2\n") ||
		!strings.Contains(out.String(), "reused an earlier superstep's exchange schedule\" phase=4 from=3 ") {
		t.Fatalf("log:\n%s", out.String())
	}
	if len(l.st.Saved) != 2 {
		t.Fatalf("%d schedules saved, want the first's and the third's", len(l.st.Saved))
	}
	l2 := &linker{p: p, tiles: map[int]*tile{}, prog: program(), saved: l.st.Saved}
	if err := l2.lowerExchanges(slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if l2.st.FromState != 2 || l2.st.ReusedExchanges != 2 || l2.st.RefusedReuses != 0 {
		t.Fatalf("with the saved schedules: %d from them, %d reused, %d refused; want 2, 2 and 0", l2.st.FromState, l2.st.ReusedExchanges, l2.st.RefusedReuses)
	}
	// A plan from elsewhere that repeats the first's schedule: its copies
	// are skipped, and the third's still serves.
	repeated := slices.Repeat(l.st.Saved[:1], 50)
	l3 := &linker{p: p, tiles: map[int]*tile{}, prog: program(), saved: append(repeated, l.st.Saved[1])}
	if err := l3.lowerExchanges(slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if l3.st.FromState != 2 || l3.st.ReusedExchanges != 2 || l3.st.RefusedReuses != 0 {
		t.Fatalf("with copies of a saved schedule: %d from them, %d reused, %d refused; want 2, 2 and 0", l3.st.FromState, l3.st.ReusedExchanges, l3.st.RefusedReuses)
	}
	// A pattern keeps no more schedules than the program has supersteps
	// of it.
	one := &linker{p: p, tiles: map[int]*tile{}, saved: l.st.Saved}
	xs := make([]sched.Transfer, 0, 3)
	for _, x := range l.prog.Steps[0].Xfers {
		xs = append(xs, x.Sched())
	}
	for n, want := range []int{0, 1, 2, 2} {
		byKey := one.savedByPattern(slog.New(slog.DiscardHandler), slices.Repeat([][]sched.Transfer{xs}, n))
		if got := len(byKey[sched.PatternKey(xs)]); got != want || len(byKey) > 1 {
			t.Errorf("%d supersteps of the pattern keep %d saved schedules (%d patterns), want %d", n, got, len(byKey), want)
		}
	}
	for _, i := range []int{0, 2, 3, 4} {
		if diff := cmp.Diff(l.exch[i], l2.exch[i]); diff != "" {
			t.Errorf("superstep %d: the plans with and without saved schedules differ (-without +with):\n%s", i, diff)
		}
	}
	for _, i := range []int{0, 2, 3, 4} {
		xs := make([]sched.Transfer, 0, 3)
		for _, x := range l.prog.Steps[i].Xfers {
			xs = append(xs, x.Sched())
		}
		want, err := sched.Schedule(p, xs, sched.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, l.exch[i]); diff != "" {
			t.Errorf("superstep %d: plan differs from the schedule (-want +got):\n%s", i, diff)
		}
	}
	lis := func(pl *sched.Plan) int {
		n := 0
		for _, in := range pl.Tile(0).Code {
			if in.Op == isa.LI {
				n++
			}
		}
		return n
	}
	if a, b := lis(l.exch[0]), lis(l.exch[3]); a != b+1 {
		t.Errorf("tile 0 loads %d values in superstep 0 and %d in superstep 3; want one fewer", a, b)
	}
}

// A search state's schedules: a link given the schedules an earlier link
// of the plan made relocates and validates them instead of scheduling,
// for the same object; a saved schedule that no longer matches its
// superstep (an address moved out of its correspondence) is scheduled
// again, for the same object too.
func TestExchangeFromState(t *testing.T) {
	data, err := os.ReadFile("../../testdata/models/qk-early.onnx")
	if err != nil {
		t.Fatal(err)
	}
	pl, o, st, _, err := planLinkN(t, data, 64, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Saved) == 0 || st.FromState != 0 {
		t.Fatalf("%d schedules saved, %d from a state; want some and 0", len(st.Saved), st.FromState)
	}
	want, _ := obj.Marshal(o)
	o2, st2, err := Link(pl, "test", Options{Saved: st.Saved})
	if err != nil {
		t.Fatal(err)
	}
	if st2.FromState != len(st.Saved) {
		t.Errorf("%d supersteps from the state, want %d", st2.FromState, len(st.Saved))
	}
	if got, _ := obj.Marshal(o2); !bytes.Equal(got, want) {
		t.Error("the object differs from the one scheduled from scratch")
	}
	// A saved schedule whose code no longer does its transfers.
	bad := append([]plan.Exchange(nil), st.Saved...)
	bad[0].Tiles = bad[0].Tiles[1:]
	o3, st3, err := Link(pl, "test", Options{Saved: bad})
	if err != nil {
		t.Fatal(err)
	}
	if st3.FromState != len(st.Saved)-1 {
		t.Errorf("%d supersteps from a damaged state, want %d", st3.FromState, len(st.Saved)-1)
	}
	if got, _ := obj.Marshal(o3); !bytes.Equal(got, want) {
		t.Error("the object differs after a damaged saved schedule")
	}
}
