package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/arch"
)

func TestParseRows(t *testing.T) {
	p := arch.MustLookup("ipu21")
	for _, tc := range []struct {
		name, models string
		tiles        int
		want         []row
		wantErr      bool
	}{
		{name: "default", models: defaultRows, want: []row{
			{"testdata/models/matmul2048.onnx", 1472, "device"}, {"testdata/models/matmul2048.onnx", 1472, "inference"},
			{"testdata/models/qk-early.onnx", 1472, "inference"}, {"testdata/models/qk-early.onnx", 64, "inference"},
			{"artifacts/transformers/bert_base_layer_fp16/model.onnx", 1472, "device"},
			{"artifacts/transformers/bert_base_layer_fp16/model.onnx", 1472, "inference"},
			{"artifacts/transformers/bert_base_encoder12_fp16/model.onnx", 1472, "inference"},
		}},
		{name: "tiles flag", models: "a.onnx, b.onnx@8", tiles: 16, want: []row{{"a.onnx", 16, "inference"}, {"b.onnx", 8, "inference"}}},
		{name: "objective", models: "a.onnx@8:device,dir/b.onnx:inference", want: []row{{"a.onnx", 8, "device"}, {"dir/b.onnx", 1472, "inference"}}},
		{name: "bad objective", models: "a.onnx:fast", wantErr: true},
		{name: "empty objective", models: "a.onnx@8:", wantErr: true},
		{name: "empty row", models: "a.onnx,,b.onnx", wantErr: true},
		{name: "bad tiles", models: "a.onnx@x", wantErr: true},
		{name: "too many tiles", models: "a.onnx@1473", wantErr: true},
		{name: "tiles flag out of range", models: "a.onnx", tiles: -1, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRows(tc.models, tc.tiles, p)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %t", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(row{})); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestModelName(t *testing.T) {
	for path, want := range map[string]string{
		"testdata/models/qk-early.onnx":                     "qk-early",
		"artifacts/transformers/bert_base_layer/model.onnx": "bert_base_layer",
		"model.onnx": "model",
	} {
		if got := modelName(path); got != want {
			t.Errorf("modelName(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestLastLine(t *testing.T) {
	for _, tc := range []struct{ name, out, want string }{
		{"error line", "log line\nipu-check: read x: boom\nlater log\n", "read x: boom"},
		{"no error line", "one\ntwo\n", "two"},
		{"empty", "", "no output"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lastLine(tc.out, "ipu-check:"); got != tc.want {
				t.Errorf("mismatch (-want +got):\n-%q\n+%q", tc.want, got)
			}
		})
	}
}
