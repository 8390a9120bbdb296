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
		{object, "plan", "an object (written by ipu-link), not a plan (written by ipu-plan)"},
		{pkg, "object", "a package (written by ipu-pack or ipu-as), not an object (written by ipu-link)"},
		{plan, "package", "a plan (written by ipu-plan), not a package (written by ipu-pack or ipu-as)"},
		{object, "model", "an object (written by ipu-link), not an ONNX model"},
		{pkg, "profile", "a package (written by ipu-pack or ipu-as), not a profile (written by ipu-check --profile)"},
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
