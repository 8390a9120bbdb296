package link

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
)

// TestReciprocal: Reciprocal (Div(1, x)) of float and float16 values
// and an inference Dropout before it, on 1, 5 and 64 tiles, bit for bit
// against the host reference at device precision.
func TestReciprocal(t *testing.T) {
	b := onnx.NewModel(13)
	b.AddInput("x", onnx.Float, []int64{3, 11})
	b.AddInput("h", onnx.Float16, []int64{2, 9})
	b.AddNode("Dropout", "drop", []string{"x"}, []string{"d"})
	b.AddNode("Reciprocal", "rx", []string{"d"}, []string{"r"})
	b.AddNode("Reciprocal", "rh", []string{"h"}, []string{"rh"})
	b.AddOutput("r", onnx.Float, []int64{3, 11})
	b.AddOutput("rh", onnx.Float16, []int64{2, 9})
	data := b.Marshal()
	for _, tiles := range []int{1, 5, 64} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			o, st, g, err := planLink(t, data, tiles)
			if err != nil {
				t.Fatal(err)
			}
			outs, res, want := runWithReference(t, o, g, 11)
			for k := range want {
				if string(outs[k]) != string(want[k].Raw) {
					t.Errorf("output %s:\n got %x\nwant %x", o.Host.Outputs[k].Name, outs[k], want[k].Raw)
				}
			}
			checkCyclesOnly(t, st, res)
		})
	}
}

// TestXor: Xor of computed BOOLs on the device and of constants folded,
// against the truth table.
func TestXor(t *testing.T) {
	b := onnx.NewModel(13)
	b.AddInput("x", onnx.Float, []int64{4, 9})
	b.AddInput("y", onnx.Float, []int64{9})
	b.AddInitializer(onnx.NewBool("p", []int64{4}, []bool{false, false, true, true}))
	b.AddInitializer(onnx.NewBool("q", []int64{4}, []bool{false, true, false, true}))
	b.AddInitializer(onnx.NewFloat32("zero", []int64{}, []float32{0}))
	b.AddNode("Greater", "gx", []string{"x", "zero"}, []string{"a"})
	b.AddNode("Less", "ly", []string{"y", "zero"}, []string{"c"})
	b.AddNode("Xor", "xor", []string{"a", "c"}, []string{"z"})
	b.AddNode("Xor", "pq", []string{"p", "q"}, []string{"pq"})
	b.AddOutput("z", onnx.Bool, []int64{4, 9})
	b.AddOutput("pq", onnx.Bool, []int64{4})
	data := b.Marshal()
	for _, tiles := range []int{1, 5} {
		o, st, _, _, in := linkedInputs(t, data, tiles, 17)
		outs, res := runObject(t, o, in)
		var want []byte
		for p := 0; p < 36; p++ {
			a := math.Float32frombits(binary.LittleEndian.Uint32(in[0][4*p:])) > 0
			c := math.Float32frombits(binary.LittleEndian.Uint32(in[1][4*(p%9):])) < 0
			want = append(want, b2byte(a != c))
		}
		if string(outs[0]) != string(want) {
			t.Errorf("%d tiles: z:\n got %x\nwant %x", tiles, outs[0], want)
		}
		if string(outs[1]) != "\x00\x01\x01\x00" {
			t.Errorf("%d tiles: pq %x", tiles, outs[1])
		}
		checkCyclesOnly(t, st, res)
	}
}

func b2byte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// TestPad: constant-mode Pad of computed values, growing and cropping,
// float with a fill value, float16, int64 with constant_value, and the
// attribute form before opset 11, on 1 and 5 tiles, bit for bit against
// the padding done here on the inputs' bytes.
func TestPad(t *testing.T) {
	type pc struct {
		dt    onnx.DataType
		shape []int64
		pads  []int64
		fill  []byte // one element
	}
	half := []byte{0x00, 0x38} // 0.5 in float16
	cases := []pc{
		{onnx.Float, []int64{2, 5, 3}, []int64{0, 1, -1, 0, -2, 2}, onnx.NewFloat32("", nil, []float32{0.5}).Raw},
		{onnx.Float16, []int64{4, 6}, []int64{1, 0, 2, 3}, half},
		{onnx.Int64, []int64{3, 4}, []int64{0, 2, 1, 0}, onnx.NewInt64("", nil, []int64{-7}).Raw},
	}
	for _, opset := range []int64{10, 13} {
		b := onnx.NewModel(opset)
		for i, c := range cases {
			if opset < 11 && c.dt != onnx.Float {
				continue
			}
			in, out := fmt.Sprintf("x%d", i), fmt.Sprintf("y%d", i)
			b.AddInput(in, c.dt, c.shape)
			if opset < 11 {
				b.AddNode("Pad", fmt.Sprintf("p%d", i), []string{in}, []string{out}, onnx.IntsAttr("pads", c.pads...), onnx.FloatAttr("value", 0.5))
			} else {
				b.AddInitializer(onnx.NewInt64(in+"_pads", []int64{int64(len(c.pads))}, c.pads))
				b.AddInitializer(&onnx.Tensor{Name: in + "_v", DType: c.dt, Raw: c.fill})
				b.AddNode("Pad", fmt.Sprintf("p%d", i), []string{in, in + "_pads", in + "_v"}, []string{out})
			}
			b.AddOutputInfo(onnx.ValueInfo{Name: out, DType: c.dt})
		}
		data := b.Marshal()
		for _, tiles := range []int{1, 5} {
			t.Run(fmt.Sprintf("opset%d/%d", opset, tiles), func(t *testing.T) {
				o, st, _, _, raw := linkedInputs(t, data, tiles, 31)
				outs, res := runObject(t, o, raw)
				k := 0
				for _, c := range cases {
					if opset < 11 && c.dt != onnx.Float {
						continue
					}
					if string(outs[k]) != string(padBytes(raw[k], c.shape, c.pads, c.fill)) {
						t.Errorf("%v %v: got %x\nwant %x", c.dt, c.pads, outs[k], padBytes(raw[k], c.shape, c.pads, c.fill))
					}
					k++
				}
				checkCyclesOnly(t, st, res)
			})
		}
	}
}

// padBytes pads row-major x (elements of len(fill) bytes) by pads, as
// Pad's constant mode defines it.
func padBytes(x []byte, shape, pads []int64, fill []byte) []byte {
	r, e := len(shape), int64(len(fill))
	out := make([]int64, r)
	n := int64(1)
	for d := range out {
		out[d] = shape[d] + pads[d] + pads[d+r]
		n *= out[d]
	}
	var res []byte
	for p := int64(0); p < n; p++ {
		rem, src, inside := p, int64(0), true
		idx := make([]int64, r)
		for d := r - 1; d >= 0; d-- {
			idx[d] = rem % out[d]
			rem /= out[d]
		}
		for d := 0; d < r; d++ {
			i := idx[d] - pads[d]
			if i < 0 || i >= shape[d] {
				inside = false
				break
			}
			src = src*shape[d] + i
		}
		if inside {
			res = append(res, x[src*e:(src+1)*e]...)
		} else {
			res = append(res, fill...)
		}
	}
	return res
}

// TestIsNaNIsInf: IsNaN and IsInf (both signs, one, neither) of float
// and float16 values holding NaNs and infinities of both signs, on 1 and
// 5 tiles, against the classes computed here.
func TestIsNaNIsInf(t *testing.T) {
	b := onnx.NewModel(13)
	b.AddInput("x", onnx.Float, []int64{3, 8})
	b.AddInput("h", onnx.Float16, []int64{2, 8})
	ops := []struct {
		op       string
		in       string
		pos, neg int64
	}{{"IsNaN", "x", 1, 1}, {"IsInf", "x", 1, 1}, {"IsInf", "x", 1, 0}, {"IsInf", "x", 0, 1}, {"IsInf", "x", 0, 0}, {"IsNaN", "h", 1, 1}, {"IsInf", "h", 1, 1}}
	for i, o := range ops {
		var attrs []onnx.Attr
		if o.op == "IsInf" {
			attrs = []onnx.Attr{onnx.IntAttr("detect_positive", o.pos), onnx.IntAttr("detect_negative", o.neg)}
		}
		b.AddNode(o.op, fmt.Sprintf("n%d", i), []string{o.in}, []string{fmt.Sprintf("y%d", i)}, attrs...)
		b.AddOutputInfo(onnx.ValueInfo{Name: fmt.Sprintf("y%d", i), DType: onnx.Bool})
	}
	data := b.Marshal()
	specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, -1.5, 3}
	for _, tiles := range []int{1, 5} {
		o, st, _, _, raw := linkedInputs(t, data, tiles, 37)
		var xs, hs []float64
		for p := 0; p < 24; p++ {
			v := specials[(p*5)%len(specials)]
			binary.LittleEndian.PutUint32(raw[0][4*p:], math.Float32bits(float32(v)))
			xs = append(xs, v)
		}
		for p := 0; p < 16; p++ {
			v := specials[(p*7+1)%len(specials)]
			binary.LittleEndian.PutUint16(raw[1][2*p:], numfmt.F64ToF16(v))
			hs = append(hs, v)
		}
		outs, res := runObject(t, o, raw)
		for i, op := range ops {
			vals := xs
			if op.in == "h" {
				vals = hs
			}
			var want []byte
			for _, v := range vals {
				r := math.IsNaN(v)
				if op.op == "IsInf" {
					r = op.pos == 1 && math.IsInf(v, 1) || op.neg == 1 && math.IsInf(v, -1)
				}
				want = append(want, b2byte(r))
			}
			if string(outs[i]) != string(want) {
				t.Errorf("%d tiles: %s %s (%d, %d): got %x\nwant %x", tiles, op.op, op.in, op.pos, op.neg, outs[i], want)
			}
		}
		checkCyclesOnly(t, st, res)
	}
}

// TestPadModes: edge, reflect and wrap Pads of computed float, float16
// and int64 values (Gathers with constant indices), growing and
// cropping, on 1 and 5 tiles against the host reference: copies, bit
// for bit.
func TestPadModes(t *testing.T) {
	b := onnx.NewModel(19)
	for i, c := range []struct {
		dt    onnx.DataType
		shape []int64
		mode  string
		pads  []int64
	}{
		{onnx.Float, []int64{3, 5, 4}, "edge", []int64{1, 0, 2, 2, -1, 0}},
		{onnx.Float, []int64{3, 5, 4}, "reflect", []int64{0, 3, -1, 2, 1, 2}},
		{onnx.Float16, []int64{4, 6}, "wrap", []int64{5, -2, 1, 9}},
		{onnx.Int64, []int64{2, 7}, "reflect", []int64{1, 6, 0, 2}},
	} {
		in, out := fmt.Sprintf("x%d", i), fmt.Sprintf("y%d", i)
		b.AddInput(in, c.dt, c.shape)
		b.AddInitializer(onnx.NewInt64(in+"_pads", []int64{int64(len(c.pads))}, c.pads))
		b.AddNode("Pad", fmt.Sprintf("p%d", i), []string{in, in + "_pads"}, []string{out}, onnx.StringAttr("mode", c.mode))
		b.AddOutputInfo(onnx.ValueInfo{Name: out, DType: c.dt})
	}
	data := b.Marshal()
	for _, tiles := range []int{1, 5} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			o, st, g, _, _ := linkedInputs(t, data, tiles, 41)
			checkVerdict(t, o, st, g, 41)
		})
	}
}
