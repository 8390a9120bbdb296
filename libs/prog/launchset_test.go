package prog

import "testing"

func TestLaunchSet(t *testing.T) {
	a, b := &Kernel{What: "a"}, &Kernel{What: "b"}
	s := NewLaunchSet()
	steps := []struct {
		t    int
		k    *Kernel
		want bool
	}{
		{0, a, true}, {0, a, false}, {1, b, true}, {1, a, true}, {0, a, false},
		{1, a, false}, {2, a, true}, {1, b, false}, {0, b, true}, {2, a, false},
	}
	for i, st := range steps {
		if got := s.Add(st.t, st.k); got != st.want {
			t.Fatalf("step %d: Add(%d, %s) = %v, want %v", i, st.t, st.k.What, got, st.want)
		}
	}
	// A new set holds none of them.
	s2 := NewLaunchSet()
	if !s2.Add(0, a) || !s2.Add(1, b) || s2.Add(0, a) {
		t.Fatal("a new set is not empty")
	}
}
