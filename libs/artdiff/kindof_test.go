package artdiff

import (
	"testing"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
)

func TestNotKind(t *testing.T) {
	plan := []byte("{\n  \"format\": \"ipu-plan/1\"\n}\n")
	object := []byte(obj.Magic + "rest")
	pkg := []byte(ipuexe.Magic + "rest")
	for _, tc := range []struct {
		data []byte
		want string
		msg  string // "" for none
	}{
		{plan, "plan", ""},
		{object, "object", ""},
		{pkg, "package", ""},
		{[]byte("\x08\x07junk"), "plan", ""},
		{object, "plan", "an object (written by ipu-link or ipu-as), not a plan (written by ipu-plan)"},
		{pkg, "object", "a package (written by ipu-pack), not an object (written by ipu-link or ipu-as)"},
		{plan, "package", "a plan (written by ipu-plan), not a package (written by ipu-pack)"},
		{object, "ONNX model", "an object (written by ipu-link or ipu-as), not an ONNX model"},
		{pkg, "assembly source", "a package (written by ipu-pack), not an assembly source"},
		{pkg, "profile", "a package (written by ipu-pack), not a profile (written by ipu-check --profile)"},
	} {
		err := NotKind(tc.data, tc.want)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.msg {
			t.Errorf("NotKind(%.12q, %q) = %q, want %q", tc.data, tc.want, got, tc.msg)
		}
	}
}
