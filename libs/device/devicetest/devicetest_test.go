package devicetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"ipu.local/formats/ipuexe"
)

func TestPackageIsCanonical(t *testing.T) {
	tests := []struct {
		arch string
		busy []int
	}{
		{"ipu21-tiny", []int{0, 2, 3}},
		{"ipu21-tiny", []int{3}},
		{"ipu2-tiny", []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.arch, func(t *testing.T) {
			want := Package(tt.arch, tt.busy...)
			data, err := ipuexe.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ipuexe.Read(data)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("round trip mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
