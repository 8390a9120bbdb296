package link

import "testing"

// TestAlignmentStats links qk-early over 64 tiles: the exchange superstep
// is scheduled here, its fast schedule fails the instruction-alignment
// validation and is repaired, and Stats carries sched's figures; the
// program still runs with the cycles the link reports (checkModel).
func TestAlignmentStats(t *testing.T) {
	_, o, st, g := linkModel(t, "../../testdata/models/qk-early.onnx", "ipu21", 64)
	a := st.Alignment
	t.Logf("supersteps %d retried %d: %+v", st.AlignedPhases, st.RetriedPhases, a)
	if st.AlignedPhases == 0 || a.Transfers != st.Transfers || !a.Success {
		t.Fatalf("alignment figures %+v over %d supersteps, %d transfers linked", a, st.AlignedPhases, st.Transfers)
	}
	if st.RetriedPhases == 0 || a.Failed == 0 || a.Rescheduled < a.Failed || a.Rounds < 2 {
		t.Errorf("want a repaired fast schedule: %+v", a)
	}
	checkModel(t, o, st, g)
}
