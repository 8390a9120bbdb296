package link

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"ipu.local/formats/obj"
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
	const model = "../../testdata/models/transformers/bert_small_encoder2_fp16/model.onnx"
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
	a, b, c := encode(t, o), encode(t, o2), encode(t, o3)
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
